"""The planner: deterministic ids, correct dependencies, the shipped campaigns' counts, and `mkb plan`."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from conftest import REPO
from mkb_ray.agents.skill import template_hash
from mkb_ray.problems import load_problems
from mkb_ray.campaign.config import ExperimentConfig, load_experiment
from mkb_ray.campaign.plan import Plan, estimate, find_stale, plan_campaign
from mkb_ray.cli.plan import add_arguments as add_plan_arguments, run as plan_from_args
from mkb_ray.records import Trial

EXPERIMENTS = REPO / "experiments"
RMS = "mlp_norm/01_fused_add_rmsnorm"
FP8 = "quantization/01_per_token_fp8_quant"


def config(**fields) -> ExperimentConfig:
    fields.setdefault("name", "t")
    fields.setdefault("models", ["smollm2"])
    fields.setdefault("problems", {"ids": [RMS]})
    return ExperimentConfig(**fields)


def ids(plan: Plan) -> list[str]:
    return [t.trial_id for t in plan.trials]


def test_quickstart_ids_are_exact_and_deterministic(problems, roster):
    quickstart = load_experiment(EXPERIMENTS / "quickstart.yaml")
    plan = plan_campaign(quickstart, problems, roster, has_gpu=False)
    bench = [f"smollm2/{p}/r0/{arm}" for p in (RMS, FP8)
             for arm in ("solo_cutedsl", "solo_tirx", "cutedsl2tirx_skill", "tirx2cutedsl_skill")]
    chain = [f"smollm2/{RMS}/chain0/{leaf}" for leaf in ("h0", "h1", "h2", "base_cutedsl_r0", "base_tirx_r0")]
    assert ids(plan) == bench + chain
    assert plan.counts_by_kind() == {"benchmark": 8, "chain_hop": 3, "chain_base": 2}
    assert len(plan) == 13 and plan.depth() == 3
    assert plan_campaign(quickstart, problems, roster, has_gpu=False).trials == plan.trials
    # No GPU here: TIRx is posed for the CPU, CuTe DSL stays the GPU variant (judged compile-only).
    assert {(t.dsl, t.target) for t in plan} == {("cutedsl", "gpu"), ("tirx", "cpu")}
    on_gpu = plan_campaign(quickstart, problems, roster, has_gpu=True)
    assert {t.target for t in on_gpu} == {"gpu"} and ids(on_gpu) == ids(plan)


def test_skill_arms_depend_on_their_solo_arm_of_the_same_replicate(problems, roster):
    plan = plan_campaign(config(replicates=2, benchmark={}), problems, roster, has_gpu=True)
    for r in (0, 1):
        prefix = f"smollm2/{RMS}/r{r}/"
        c2t = plan.by_id(prefix + "cutedsl2tirx_skill")
        t2c = plan.by_id[prefix + "tirx2cutedsl_skill"]
        assert (c2t.dsl, c2t.arm, c2t.skill_from, c2t.replicate) == ("tirx", "skill", prefix + "solo_cutedsl", r)
        assert (t2c.dsl, t2c.arm, t2c.skill_from) == ("cutedsl", "skill", prefix + "solo_tirx")
        assert c2t.depends_on == (prefix + "solo_cutedsl",)
        solo = plan.by_id(prefix + "solo_cutedsl")
        assert (solo.arm, solo.skill_from, solo.depends_on, solo.arm_name) == ("solo", None, (), "solo_cutedsl")
        assert plan.dependants(prefix + "solo_cutedsl") == [c2t]


def test_a_skill_arm_plans_its_unlisted_source(problems, roster):
    plan = plan_campaign(config(benchmark={"arms": ["tirx2cutedsl_skill"]}), problems, roster, has_gpu=True)
    assert ids(plan) == [f"smollm2/{RMS}/r0/solo_tirx", f"smollm2/{RMS}/r0/tirx2cutedsl_skill"]


def test_chains_alternate_and_each_hop_waits_for_the_previous(problems, roster):
    plan = plan_campaign(config(chains={"hops": 4, "start_dsl": "both", "baselines": 0}), problems, roster, True)
    hops = [t for t in plan if t.kind == "chain_hop"]
    assert len(hops) == 8
    for t in hops:
        start = "cutedsl" if t.chain == 0 else "tirx"
        other = "tirx" if start == "cutedsl" else "cutedsl"
        assert t.trial_id == f"smollm2/{RMS}/chain{t.chain}/h{t.hop}"
        assert t.dsl == (start if t.hop % 2 == 0 else other)
        if t.hop == 0:
            assert t.arm == "solo" and t.skill_from is None
        else:
            assert t.arm == "skill" and t.skill_from == f"smollm2/{RMS}/chain{t.chain}/h{t.hop - 1}"
    same = plan_campaign(config(chains={"hops": 3, "start_dsl": "tirx", "pattern": "same", "per_cell": 2}),
                         problems, roster, True)
    assert {t.dsl for t in same} == {"tirx"}
    # baselines default to the replicates (1), one per DSL the chain uses: a same-DSL chain needs one DSL.
    assert [t.trial_id for t in same if t.kind == "chain_base"] == \
        [f"smollm2/{RMS}/chain0/base_tirx_r0", f"smollm2/{RMS}/chain1/base_tirx_r0"]


def test_chain_baselines_cover_each_dsl_of_the_chain(problems, roster):
    plan = plan_campaign(config(replicates=3, chains={"hops": 2, "baselines": 2}), problems, roster, True)
    bases = [t for t in plan if t.kind == "chain_base"]
    assert [t.trial_id.rsplit("/", 1)[1] for t in bases] == \
        ["base_cutedsl_r0", "base_cutedsl_r1", "base_tirx_r0", "base_tirx_r1"]
    assert all(t.arm == "solo" and t.chain == 0 and not t.depends_on for t in bases)


def test_scale_synthetic_plans_88800_trials(roster):
    # How fast it plans (and the graph's per-trial costs) is measured by benchmarks/plan_graph.py, not here.
    scale = load_experiment(EXPERIMENTS / "scale-synthetic.yaml")
    plan = plan_campaign(scale, None, roster, has_gpu=False)
    assert len(plan) == 88_800 and plan.counts_by_kind() == {"chain_hop": 88_800} and plan.synthetic
    assert plan.depth() == 100
    assert all(counts == {"chain_hop": 14_800} for counts in plan.counts_by_model().values())
    first = plan.trials[0]
    assert first.trial_id == "glm-5.3-flash/synthetic/attention_0/chain0/h0" and first.target == "gpu"
    assert plan.by_id("qwen3.8-flash/synthetic/linear_attention_11/chain1/h99").dsl == "cutedsl"
    # One config hash per model (both DSLs target the GPU here, so they shape the attempt alike), one template
    # hash, one problem hash per problem.
    assert {t.template_hash for t in plan} == {template_hash()}
    assert len({t.config_hash for t in plan}) == len({(t.model, t.config_hash) for t in plan}) == 6
    assert len({t.problem_hash for t in plan}) == len({t.problem_id for t in plan}) == 74
    ready = plan.ready(set())
    assert len(ready) == 888 and all(t.hop == 0 for t in ready)


def test_ready_semantics(problems, roster):
    plan = plan_campaign(config(benchmark={}, chains={"hops": 3, "baselines": 0}), problems, roster, True)
    p = f"smollm2/{RMS}"
    roots = [f"{p}/r0/solo_cutedsl", f"{p}/r0/solo_tirx", f"{p}/chain0/h0"]
    assert [t.trial_id for t in plan.ready(set())] == roots
    done = {f"{p}/r0/solo_cutedsl", f"{p}/chain0/h0", "someone/else/r0/solo_tirx"}  # unplanned ids are ignored
    assert [t.trial_id for t in plan.ready(done)] == \
        [f"{p}/r0/solo_tirx", f"{p}/r0/cutedsl2tirx_skill", f"{p}/chain0/h1"]
    assert [t.trial_id for t in plan.newly_ready(f"{p}/chain0/h0", done)] == [f"{p}/chain0/h1"]
    assert plan.ready(set(ids(plan))) == []
    assert plan.descendants([f"{p}/chain0/h0"]) == [f"{p}/chain0/h1", f"{p}/chain0/h2"]
    assert plan.descendants([f"{p}/chain0/h1", f"{p}/chain0/h0"]) == [f"{p}/chain0/h2"]   # never the starts
    assert plan.descendants([f"{p}/chain0/h2"]) == [] and plan.depth() == 3
    # The scheduler's priority: the longest path hanging off each trial, itself included.
    tails = dict(zip(ids(plan), plan.graph.tail_lengths()))
    assert [tails[f"{p}/chain0/h{k}"] for k in range(3)] == [3, 2, 1]
    assert (tails[f"{p}/r0/solo_cutedsl"], tails[f"{p}/r0/cutedsl2tirx_skill"]) == (2, 1)


def test_plan_refuses_duplicates_and_missing_sources():
    solo = Trial("a/p/r0/solo_tirx", "a", "p", "tirx", "gpu", "solo", "benchmark")
    skill = Trial("a/p/r0/tirx2cutedsl_skill", "a", "p", "cutedsl", "gpu", "skill", "benchmark",
                  skill_from=solo.trial_id)
    assert len(Plan([solo, skill])) == 2
    with pytest.raises(ValueError, match="duplicate"):
        Plan([solo, solo])
    with pytest.raises(ValueError, match="not planned before it"):
        Plan([skill, solo])


def test_trial_hashes_and_find_stale(problems, roster):
    base = config(benchmark={}, chains={"hops": 2, "baselines": 0})
    plan = plan_campaign(base, problems, roster, True)
    stored = {t.trial_id: (t.config_hash, t.problem_hash, t.template_hash) for t in plan}
    assert find_stale(plan, stored) == []
    # Adding a model or a problem leaves the other trials current; so does a serving-capacity change.
    wider = plan_campaign(base.model_copy(update={"models": ["smollm2", "glm-5.3"],
                                                  "problems": base.problems.model_copy(update={"ids": [RMS, FP8]})}),
                          problems, roster, True)
    assert find_stale(wider, stored) == [] and len(wider) == 4 * len(plan)
    bigger = dict(roster, smollm2=roster["smollm2"].model_copy(update={"max_concurrency": 8}))
    assert find_stale(plan_campaign(base, problems, bigger, True), stored) == []
    # A budget change makes every trial stale; one changed problem hash only that trial (and, asked, its dependants).
    tighter = plan_campaign(base.model_copy(update={"budget": base.budget.model_copy(update={"submissions": 3})}),
                            problems, roster, True)
    assert find_stale(tighter, stored) == ids(plan)
    h0 = f"smollm2/{RMS}/chain0/h0"
    stored[h0] = (stored[h0][0], "0" * 64, stored[h0][2])
    assert find_stale(plan, stored) == [h0]
    assert find_stale(plan, stored, include_dependants=True) == [h0, f"smollm2/{RMS}/chain0/h1"]
    # The problem hash is the judge's (problem_loader re-exports the torch-free problem_hash module's).
    from mkb_ray.checker import problem_hash as hash_module
    from mkb_ray.checker.problem_loader import problem_hash

    path = REPO / "problems" / f"{RMS}.py"
    assert problem_hash is hash_module.problem_hash
    assert problem_hash(path) == plan.by_id(h0).problem_hash


def test_serving_smollm2_on_a_gpu_makes_its_trials_new_but_gpu_only_fields_leave_cpu_trials_fresh(problems, roster):
    """`scheduler.model_devices: cuda` serves the CPU-roster SmolLM2 on a GPU in bf16: other numerics, so other trials;
    the roster's GPU-only fields (dtype, start-up warm-up) must not make its CPU trials stale."""
    from mkb_ray.campaign.build import plan_run
    from mkb_ray.campaign.plan import trial_config_hash

    base = config(benchmark={})
    plan = plan_campaign(base, problems, roster, True)
    stored = {t.trial_id: (t.config_hash, t.problem_hash, t.template_hash) for t in plan}
    cpu = roster["smollm2"]
    assert cpu.gpu_dtype == "bfloat16" and not cpu.gpu_kernel_warmup and cpu.num_gpus == 0
    # The hash a CPU SmolLM2 trial had before the GPU fields existed: the same spec without them.
    before = cpu.model_copy(update={"gpu_dtype": None, "gpu_kernel_warmup": True})
    assert trial_config_hash(before, base.budget, "chat", "cpu", None) == \
        trial_config_hash(cpu, base.budget, "chat", "cpu", None)
    on_gpu = base.model_copy(update={"scheduler": base.scheduler.model_copy(update={"model_devices": "cuda"})})
    run = plan_run(on_gpu, has_gpu=True)
    assert run.roster["smollm2"].num_gpus == 1 and run.roster["glm-5.3"].num_gpus == roster["glm-5.3"].num_gpus
    assert find_stale(run.plan, stored) == ids(plan)
    warm = {**run.roster, "smollm2": run.roster["smollm2"].model_copy(update={"gpu_kernel_warmup": True})}
    assert find_stale(plan_campaign(on_gpu, problems, warm, True),
                      {t.trial_id: (t.config_hash, t.problem_hash, t.template_hash) for t in run.plan}) == []


def test_estimate_is_positive_and_says_so(roster):
    bench = load_experiment(EXPERIMENTS / "benchmark-6model.yaml")
    plan = plan_campaign(bench, None, roster, has_gpu=True)
    shipped = len(load_problems().problems)
    assert len(plan) == shipped * 6 * 4 * 3  # problems × models × arms × replicates
    cost = estimate(plan, roster, bench)
    assert cost.attempts == len(plan) and cost.judged_submissions == len(plan) * 11
    assert cost.model_gpu_hours > 0 and cost.evaluator_gpu_hours > 0 and cost.gpu_hours > cost.model_gpu_hours
    # By hand: every trial is GPU-judged 11 times at 2.79 s, and each (problem, DSL) pays its baseline once (16.41 s).
    assert cost.evaluator_gpu_hours == pytest.approx((len(plan) * 11 * 2.79 + shipped * 2 * 16.41) / 3600)
    assert cost.critical_path_hours > 0 and "estimate" in cost.assumptions[0]
    local = {m.model: m for m in cost.per_model}
    assert local["glm-5.3-flash"].gpu_hours > 0 and local["gpt-5.6-sol"].gpu_hours == 0
    # glm-5.3-flash: its attempts × 20 min × 8 GPUs / (32 concurrent / 2 replicas)
    assert local["glm-5.3-flash"].gpu_hours == pytest.approx(shipped * 4 * 3 * 1200 * 8 / 16 / 3600)


def test_the_gpu_proof_serves_smollm2_on_a_shared_gpu_and_plans_a_pair_and_a_chain():
    """experiments/gpu-proof.yaml (issue 31's campaign on one GPU): a solo/skill pair, a 3-hop chain and its two
    baselines, SmolLM2 on the GPU with half of it, the GPU evaluator on the other half."""
    from mkb_ray.campaign.build import plan_run
    from mkb_ray.campaign.services import evaluator_gpu_share

    proof = load_experiment(EXPERIMENTS / "gpu-proof.yaml")
    run = plan_run(proof, has_gpu=True)
    assert run.roster["smollm2"].num_gpus == 1 and run.roster["smollm2"].gpu_dtype == "bfloat16"
    assert proof.scheduler.evaluator_devices == "cuda" and proof.target == "gpu"
    assert evaluator_gpu_share(proof.scheduler.model_gpu_fraction) + proof.scheduler.model_gpu_fraction == 1
    arms = sorted(t.trial_id.split("/", 3)[3] for t in run.plan)
    assert arms == ["chain0/base_cutedsl_r0", "chain0/base_tirx_r0", "chain0/h0", "chain0/h1", "chain0/h2",
                    "r0/cutedsl2tirx_skill", "r0/solo_cutedsl", "r0/solo_tirx"]


@pytest.mark.parametrize("name,hops", [("chain-10", 10), ("chain-100", 100)])
def test_chain_campaign_counts(roster, name, hops):
    plan = plan_campaign(load_experiment(EXPERIMENTS / f"{name}.yaml"), None, roster, has_gpu=True)
    # 6 models × every problem × 2 start DSLs × (hops + 2 DSLs × 3 solo baselines)
    assert len(plan) == 6 * len(load_problems().problems) * 2 * (hops + 2 * 3)


def run_plan(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    add_plan_arguments(parser)
    return plan_from_args(parser.parse_args(list(argv)))


def test_mkb_plan_prints_counts(capsys):
    assert run_plan(str(EXPERIMENTS / "quickstart.yaml"), "--show", "3", "--no-gpu") == 0
    out = capsys.readouterr().out
    for text in ("quickstart", "13", "benchmark", "chain_hop", "cutedsl2tirx_skill", "ESTIMATE", "assumptions",
                 f"smollm2/{RMS}/r0/solo_cutedsl", "tirx: cpu"):
        assert text in out, text


def test_mkb_plan_json(capsys):
    import json

    assert run_plan(str(EXPERIMENTS / "quickstart.yaml"), "--json", "--show", "2", "--gpu") == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["trials"] == 13 and summary["targets"] == {"cutedsl": "gpu", "tirx": "gpu"}
    assert summary["first_trials"][1]["id"].endswith("r0/solo_tirx") and summary["estimate"]["gpu_hours"] > 0


def test_mkb_plan_malformed_yaml_exits_2(tmp_path: Path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmodels: [smollm2\n")
    assert run_plan(str(bad)) == 2
    err = capsys.readouterr().err
    assert err.startswith("mkb: error: ") and str(bad) in err and len(err.strip().splitlines()) == 1
    missing = tmp_path / "missing.yaml"
    assert run_plan(str(missing)) == 2 and "cannot read" in capsys.readouterr().err
