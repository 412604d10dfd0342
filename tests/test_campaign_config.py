"""Experiment YAMLs: the shipped campaigns load, and every mistake is one line naming the file and the field."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import REPO
from mkb_ray.problems import load_problems
from mkb_ray.campaign.config import (ExperimentConfig, ExperimentConfigError, config_hash, load_experiment,
                                     model_concurrency, resolve_agent, resolve_target, select_problems,
                                     synthetic_problem_ids)
from mkb_ray.models.roster import load_roster

EXPERIMENTS = REPO / "experiments"
SHIPPED = ["quickstart", "benchmark-6model", "chain-10", "chain-100", "scale-synthetic", "causal-benchmark",
           "causal-chain-100", "causal-quickstart", "causal-containment"]
MINIMAL = """\
name: tiny
models: [smollm2]
problems:
  ids: [mlp_norm/01_fused_add_rmsnorm]
benchmark: {}
"""


def write(tmp_path: Path, text: str, name: str = "x.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(path: Path) -> str:
    with pytest.raises(ExperimentConfigError) as info:
        load_experiment(path)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_experiments_load(name):
    config = load_experiment(EXPERIMENTS / f"{name}.yaml")
    assert config.name == name and config.run_dir == Path("runs") / name


def test_quickstart_is_the_small_cpu_default():
    config = load_experiment(EXPERIMENTS / "quickstart.yaml")
    assert config.models == ["smollm2"] and config.agent == "chat" and config.target == "auto"
    assert config.replicates == 1 and config.benchmark is not None and len(config.benchmark.arms) == 4
    assert config.chains is not None and config.chains.hops == 3 and config.chains.per_cell == 1
    # The 3-hop chain is the critical path of the ~11 min quickstart: three attempt clocks must fit in 12 minutes.
    assert config.budget.wall_clock_s * config.chains.hops <= 720 and config.budget.submissions <= 2
    assert model_concurrency(config, load_roster()["smollm2"]) == 4
    selection = select_problems(config)
    assert len(selection.campaign) == 2 and len(selection.chains) == 1


def test_minimal_config_defaults(tmp_path):
    config = load_experiment(write(tmp_path, MINIMAL))
    assert config.benchmark is not None and len(config.benchmark.arms) == 4
    assert config.interventions == [] and config.target == "auto" and config.scheduler.max_trial_retries == 2
    assert config.budget.wall_clock_s == 2400 and config.budget.submissions == 10
    assert resolve_agent(config, load_roster()["smollm2"]) == "chat"
    assert resolve_agent(config, load_roster()["glm-5.3"]) == "workspace"


def test_unknown_field_names_file_and_field(tmp_path):
    path = write(tmp_path, MINIMAL + "replicate: 3\n")
    assert error_of(path) == f"{path}: replicate: unknown field (typo?)"
    nested = write(tmp_path, MINIMAL + "chains: {hops: 3, per_cel: 2}\n", "y.yaml")
    assert error_of(nested) == f"{nested}: chains.per_cel: unknown field (typo?)"


def test_bad_hops_names_the_field(tmp_path):
    path = write(tmp_path, MINIMAL + "chains: {hops: 0}\n")
    assert error_of(path) == f"{path}: chains.hops: Input should be greater than 0"


def test_bad_list_item_names_its_index(tmp_path):
    path = write(tmp_path, MINIMAL.replace("benchmark: {}", "benchmark: {arms: [solo_tirx, solo_cuda]}"))
    message = error_of(path)
    assert message.startswith(f"{path}: benchmark.arms[1]: Input should be")


def test_unknown_model_names_it_and_lists_the_roster(tmp_path):
    path = write(tmp_path, MINIMAL.replace("[smollm2]", "[smollm2, gpt-9]"))
    message = error_of(path)
    assert message.startswith(f"{path}: models[1]: unknown model 'gpt-9'")
    assert "smollm2" in message and "glm-5.3-flash" in message
    concurrency = write(tmp_path, MINIMAL + "scheduler: {model_concurrency: {smolm2: 2}}\n", "y.yaml")
    assert "scheduler.model_concurrency.smolm2: unknown model 'smolm2'" in error_of(concurrency)


def test_unknown_problem_names_it(tmp_path):
    path = write(tmp_path, MINIMAL.replace("01_fused_add_rmsnorm", "99_nope"))
    assert error_of(path).startswith(f"{path}: problems.ids[0]: unknown problem 'mlp_norm/99_nope'")
    glob = write(tmp_path, MINIMAL.replace("ids: [mlp_norm/01_fused_add_rmsnorm]", "globs: ['mlp/*']"), "y.yaml")
    assert error_of(glob) == f"{glob}: problems.globs[0]: 'mlp/*' matches no problem"


def test_bad_yaml_syntax_is_one_line(tmp_path):
    path = write(tmp_path, "name: x\nmodels: [smollm2\nbenchmark: {}\n")
    message = error_of(path)
    assert message.startswith(f"{path}: invalid YAML at line")
    not_a_mapping = write(tmp_path, "- a\n- b\n", "y.yaml")
    assert "expected a mapping" in error_of(not_a_mapping)


def test_interventions_load_typed_and_their_mistakes_name_the_field(tmp_path):
    assert load_experiment(write(tmp_path, MINIMAL + "interventions: []\n")).interventions == []
    config = load_experiment(write(tmp_path, MINIMAL + "interventions:\n"
                                   "  - {kind: claim_ablation, categories: [unsupported_closure], claims: 2}\n"
                                   "  - {kind: verification_gate, mode: mark, arms: [tirx2cutedsl_skill]}\n"))
    ablation, gate = config.interventions
    assert ablation.tokens() == ["ablate-unsupported_closure", "ablate-claim0", "ablate-claim1"]
    assert ablation.arms == ["cutedsl2tirx_skill", "tirx2cutedsl_skill"] and ablation.annotator == "offline"
    assert gate.tokens() == ["gate-mark"] and gate.on_benchmark and not config.chain_variants
    cases = {
        "[{kind: ablate_skill}]": "interventions[0]: Input tag 'ablate_skill' found using 'kind' does not match",
        "[{kind: claim_ablation}]": "interventions[0].claim_ablation.categories: name at least one category",
        "[{kind: claim_ablation, categories: [no_such]}]": "categories: no_such not in taxonomy mkb-11",
        "[{kind: placebo, arms: [solo_tirx]}]": "interventions[0].placebo.arms[0]: Input should be",
        "[{kind: verification_gate, chains: true}]": "interventions[0].chains: twin chains need a `chains:`",
        "[{kind: episodic, benchmark: false}]": "interventions[0].benchmark: an intervention on neither",
        "[{kind: placebo}, {kind: placebo, arms: [cutedsl2tirx_skill]}]":
            "interventions: the arm cutedsl2tirx_skill~placebo is planned by interventions[0] and interventions[1]",
    }
    for i, (body, expected) in enumerate(cases.items()):
        path = write(tmp_path, MINIMAL + f"interventions: {body}\n", f"bad{i}.yaml")
        message = error_of(path)
        assert message.startswith(f"{path}: ") and expected in message, message
    # Interventions alone make a campaign (their controls are planned for them).
    alone = write(tmp_path, MINIMAL.replace("benchmark: {}\n", "interventions: [{kind: episodic}]\n"), "z.yaml")
    assert load_experiment(alone).benchmark is None


def test_cross_field_checks_name_their_field(tmp_path):
    neither = write(tmp_path, MINIMAL.replace("benchmark: {}\n", ""))
    assert error_of(neither).startswith(f"{neither}: benchmark: a campaign needs benchmark arms, chains or "
                                        "interventions")
    synthetic = write(tmp_path, "name: s\nmodels: [smollm2]\nproblems: {synthetic: 4}\nbenchmark: {}\n", "y.yaml")
    assert error_of(synthetic).startswith(f"{synthetic}: problems.synthetic: synthetic problem ids need")
    mixed = write(tmp_path, "name: s\nmodels: [smollm2]\nsynthetic: {}\nproblems: {synthetic: 4, families: [moe]}\n"
                            "benchmark: {}\n", "z.yaml")
    assert error_of(mixed).startswith(f"{mixed}: problems.synthetic: replaces the problem set")


def test_chain_problems_must_be_campaign_problems(tmp_path):
    path = write(tmp_path, MINIMAL + "chains: {hops: 2, problems: {ids: [moe/01_topk_softmax_renorm]}}\n")
    assert error_of(path).startswith(f"{path}: chains.problems.ids[0]: unknown problem 'moe/01_topk_softmax_renorm'")


def test_selector_union_of_ids_families_and_globs(tmp_path):
    text = MINIMAL.replace("ids: [mlp_norm/01_fused_add_rmsnorm]",
                           "ids: [mlp_norm/01_fused_add_rmsnorm]\n  families: [moe]\n  globs: ['quantization/02*']")
    selection = select_problems(load_experiment(write(tmp_path, text)))
    moe = [p.problem_id for p in load_problems().problems if p.family == "moe"]
    assert {"moe/01_topk_softmax_renorm", "moe/02_unpermute_weighted_combine"} <= set(moe)
    assert selection.campaign == ["mlp_norm/01_fused_add_rmsnorm", *moe, "quantization/02_per_group_fp8_quant"]
    everything = select_problems(load_experiment(write(tmp_path, "name: a\nmodels: [smollm2]\nbenchmark: {}\n",
                                                       "all.yaml")))
    assert everything.campaign == [p.problem_id for p in load_problems().problems]  # every shipped problem


def test_external_root_is_relative_to_the_yaml(tmp_path):
    family = tmp_path / "suite" / "mlp_norm"
    family.mkdir(parents=True)
    for suffix in (".py", ".toml"):
        shutil.copy(REPO / "problems" / "mlp_norm" / f"01_fused_add_rmsnorm{suffix}", family)
    (tmp_path / "exp").mkdir()
    path = write(tmp_path / "exp", "name: ext\nmodels: [smollm2]\nproblems: {root: ../suite}\nbenchmark: {}\n")
    config = load_experiment(path)
    assert config.problems.root == (tmp_path / "suite").resolve()
    assert select_problems(config).campaign == ["mlp_norm/01_fused_add_rmsnorm"]


def test_base_include_merges_deeply(tmp_path):
    write(tmp_path, MINIMAL + "replicates: 2\nchains: {hops: 10, start_dsl: tirx, pattern: same}\n"
                              "budget: {submissions: 3, wall_clock_s: 600}\n", "common.yaml")
    path = write(tmp_path, "base: common.yaml\nname: long\nchains: {hops: 100}\nbudget: {submissions: 5}\n")
    config = load_experiment(path)
    assert config.name == "long" and config.replicates == 2 and config.models == ["smollm2"]
    assert config.chains is not None and (config.chains.hops, config.chains.start_dsl, config.chains.pattern) == \
        (100, "tirx", "same")
    assert (config.budget.submissions, config.budget.wall_clock_s) == (5, 600)


def test_base_errors_name_the_file_that_holds_the_field(tmp_path):
    base = write(tmp_path, MINIMAL + "replicats: 2\n", "common.yaml")
    path = write(tmp_path, "base: common.yaml\nname: long\n")
    assert error_of(path) == f"{base}: replicats: unknown field (typo?)"
    write(tmp_path, "base: x.yaml\n" + MINIMAL, "nested.yaml")
    chained = write(tmp_path, "base: nested.yaml\nname: n\n", "y.yaml")
    assert "at most one include" in error_of(chained)
    missing = write(tmp_path, "base: nope.yaml\nname: n\n", "z.yaml")
    assert error_of(missing).startswith(f"{missing}: base: no file")


def test_resolve_target():
    auto = ExperimentConfig(name="a", models=["smollm2"], benchmark={})
    gpu = auto.model_copy(update={"target": "gpu"})
    cpu = auto.model_copy(update={"target": "cpu"})
    assert [resolve_target("tirx", auto, g) for g in (True, False)] == ["gpu", "cpu"]
    assert [resolve_target("tirx", gpu, g) for g in (True, False)] == ["gpu", "gpu"]
    assert [resolve_target("tirx", cpu, g) for g in (True, False)] == ["cpu", "cpu"]
    # CuTe DSL has no CPU variant: judged compile-only where there is no GPU.
    assert {resolve_target("cutedsl", c, g) for c in (auto, gpu, cpu) for g in (True, False)} == {"gpu"}


def test_config_hash_is_canonical(tmp_path):
    a = load_experiment(write(tmp_path, MINIMAL))
    b = load_experiment(write(tmp_path, "benchmark: {}\nproblems: {ids: [mlp_norm/01_fused_add_rmsnorm]}\n"
                                        "models: [smollm2]\nname: tiny\n", "y.yaml"))
    assert config_hash(a) == config_hash(b) and len(config_hash(a)) == 64
    assert config_hash(a.model_copy(update={"replicates": 2})) != config_hash(a)


def test_synthetic_ids_cycle_through_the_families():
    ids = synthetic_problem_ids(8)
    assert ids[:2] == ["synthetic/attention_0", "synthetic/kv_cache_0"]
    assert ids[6:] == ["synthetic/attention_1", "synthetic/kv_cache_1"]
