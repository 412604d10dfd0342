"""Intervention arms, planned (issue 29): exact ids and dependencies, twins of the skill arms, gated chains sharing
their twins' baselines, the arm-name grammar, and the shipped causal campaigns' counts."""
from __future__ import annotations

import pytest

from conftest import REPO
from mkb_ray.campaign.config import ExperimentConfig, ExperimentConfigError, load_experiment
from mkb_ray.campaign.plan import plan_campaign, placebo_donor
from mkb_ray.problems import load_problems
from mkb_ray.records.intervention import control_trial_id, parse_arm
from test_plan import config as plan_config

EXPERIMENTS = REPO / "experiments"
RMS = "mlp_norm/01_fused_add_rmsnorm"
SILU = "mlp_norm/02_silu_and_mul"
FP8 = "quantization/01_per_token_fp8_quant"


def config(**fields) -> ExperimentConfig:
    """test_plan's config, over the two mlp_norm problems (a placebo needs a donor of the family)."""
    fields.setdefault("problems", {"ids": [RMS, SILU]})
    return plan_config(**fields)


def test_each_kind_is_a_twin_of_its_skill_arm_with_exact_ids_and_dependencies(problems, roster):
    plan = plan_campaign(config(interventions=[
        {"kind": "claim_ablation", "categories": ["unsupported_closure"], "claims": 1,
         "arms": ["cutedsl2tirx_skill"]},
        {"kind": "placebo", "arms": ["cutedsl2tirx_skill"]},
        {"kind": "budget_matched_solo", "arms": ["cutedsl2tirx_skill"]},
        {"kind": "episodic", "arms": ["cutedsl2tirx_skill"]},
        {"kind": "verification_gate", "mode": "mark", "arms": ["cutedsl2tirx_skill"]}]), problems, roster, False)
    prefix = f"smollm2/{RMS}/r0/"
    by_id = plan.by_id
    # The controls (and their sources) are planned though no `benchmark:` lists them; the other direction is not.
    assert {t.arm_name for t in plan.trials if t.kind == "benchmark"} == {"solo_cutedsl", "cutedsl2tirx_skill"}
    ablation = by_id(prefix + "cutedsl2tirx_skill~ablate-unsupported_closure")
    assert (ablation.kind, ablation.arm, ablation.dsl, ablation.skill_from, ablation.depends_on) == \
        ("intervention", "skill", "tirx", prefix + "solo_cutedsl", (prefix + "solo_cutedsl",))
    assert by_id(prefix + "cutedsl2tirx_skill~ablate-claim0").skill_from == prefix + "solo_cutedsl"
    # The placebo reads the other mlp_norm problem's CuTe DSL solo and waits on its own source (for the length).
    placebo = by_id(prefix + "cutedsl2tirx_skill~placebo")
    assert placebo.skill_from == f"smollm2/{SILU}/r0/solo_cutedsl" and placebo.after == (prefix + "solo_cutedsl",)
    assert by_id(f"smollm2/{SILU}/r0/cutedsl2tirx_skill~placebo").skill_from == prefix + "solo_cutedsl"
    # The budget-matched solo reads nothing and waits on its control (whose reading it is given).
    budget = by_id(prefix + "cutedsl2tirx_skill~budget_solo")
    assert (budget.arm, budget.skill_from, budget.depends_on) == ("solo", None, (prefix + "cutedsl2tirx_skill",))
    assert by_id(prefix + "cutedsl2tirx_skill~episodic").skill_from == prefix + "solo_cutedsl"
    assert by_id(prefix + "cutedsl2tirx_skill~gate-mark").arm == "skill"
    # Twins are deterministic, and their config hash names the intervention (a changed annotator makes only them
    # stale), unlike their control's.
    control = by_id(prefix + "cutedsl2tirx_skill")
    assert ablation.config_hash != control.config_hash != by_id(prefix + "cutedsl2tirx_skill~gate-mark").config_hash
    assert len(plan) == 2 * (2 + 6)


def test_the_arm_grammar_round_trips():
    for arm_name, label in [("cutedsl2tirx_skill~ablate-unsupported_closure", "ablate unsupported_closure"),
                            ("tirx2cutedsl_skill~ablate-claim3", "ablate claim 3"),
                            ("cutedsl2tirx_skill~placebo", "placebo"),
                            ("cutedsl2tirx_skill~budget_solo", "budget-matched solo"),
                            ("cutedsl2tirx_skill~episodic", "episodic"),
                            ("chain1~gate-remove", "gate (remove)")]:
        ref = parse_arm(arm_name)
        assert ref is not None and ref.arm_name == arm_name and ref.label == label
    assert parse_arm("solo_tirx") is None and parse_arm(None) is None
    assert parse_arm("chain1~gate-remove").twin_chain == 1
    assert parse_arm("cutedsl2tirx_skill~placebo").twin_chain is None
    ref = parse_arm("cutedsl2tirx_skill~placebo")
    assert control_trial_id("m/a/01_x/r2/cutedsl2tirx_skill~placebo", ref) == "m/a/01_x/r2/cutedsl2tirx_skill"
    with pytest.raises(ValueError, match="unknown intervention token"):
        parse_arm("cutedsl2tirx_skill~ablate")
    with pytest.raises(ValueError, match="does not end in"):
        control_trial_id("m/a/r0/cutedsl2tirx_skill", ref)


def test_gated_chains_twin_every_chain_and_share_its_baselines(problems, roster):
    plan = plan_campaign(config(problems={"ids": [RMS]}, chains={"hops": 3, "start_dsl": "both", "baselines": 1},
                                interventions=[{"kind": "verification_gate", "benchmark": False, "chains": True}]),
                         problems, roster, False)
    chain = f"smollm2/{RMS}/chain"
    # Chains 0, 1 plain (from cutedsl, from tirx); 2, 3 their gated twins, with the same DSL pattern, no baselines.
    for c, twin in ((2, 0), (3, 1)):
        hops = [plan.by_id(f"{chain}{c}/h{k}") for k in range(3)]
        assert [h.arm_name for h in hops] == [f"chain{twin}~gate-remove"] * 3
        assert [h.dsl for h in hops] == [plan.by_id(f"{chain}{twin}/h{k}").dsl for k in range(3)]
        assert hops[2].skill_from == f"{chain}{c}/h1"
        assert not any(t.trial_id.startswith(f"{chain}{c}/base") for t in plan.trials)
    assert plan.by_id(f"{chain}0/h1").arm_name is None
    assert len(plan) == 4 * 3 + 2 * 2 * 1 and not any(t.kind == "intervention" for t in plan.trials)


def test_a_placebo_needs_another_problem_of_the_family(problems, roster):
    assert placebo_donor(RMS, [RMS, FP8, SILU], {RMS: "mlp_norm", FP8: "quantization", SILU: "mlp_norm"}) == SILU
    assert placebo_donor(FP8, [RMS, FP8, SILU], {RMS: "mlp_norm", FP8: "quantization", SILU: "mlp_norm"}) is None
    with pytest.raises(ExperimentConfigError, match=r"interventions\[0\]: placebo: mlp_norm/01_fused_add_rmsnorm "
                                                    r"has no other problem of family 'mlp_norm'"):
        plan_campaign(config(problems={"ids": [RMS, FP8]}, interventions=[{"kind": "placebo"}]), problems, roster,
                      False)


@pytest.mark.parametrize("name,per_model", [
    # 74 problems × 3 replicates × (4 arms + 2 skill arms × (5 ablations + placebo + budget + episodic + 2 gates))
    ("causal-benchmark", 74 * 3 * (4 + 2 * 10)),
    # 74 problems × 2 start DSLs × (100 hops + 100 gated hops + 2 DSLs × 3 baselines)
    ("causal-chain-100", 74 * 2 * (200 + 6)),
    # 74 problems × 2 start DSLs × (10 hops + 5 probe chains × 10 hops + 2 DSLs × 3 baselines)
    ("causal-containment", 74 * 2 * (60 + 6)),
])
def test_the_shipped_causal_campaigns_plan(roster, name, per_model):
    plan = plan_campaign(load_experiment(EXPERIMENTS / f"{name}.yaml"), None, roster, has_gpu=True)
    assert len(load_problems().problems) == 74
    assert len(plan) == 6 * per_model


def test_the_causal_quickstart_plans_one_of_each(problems, roster):
    plan = plan_campaign(load_experiment(EXPERIMENTS / "causal-quickstart.yaml"), problems, roster, False)
    arms = plan.counts_by_arm()
    assert arms == {"solo_cutedsl": 2, "solo_tirx": 2, "cutedsl2tirx_skill": 2, "cutedsl2tirx_skill~ablate-claim0": 2,
                    "cutedsl2tirx_skill~placebo": 2, "cutedsl2tirx_skill~episodic": 2, "chain_hop": 3,
                    "chain_base": 2, "chain0~gate-remove": 3}


def test_containment_probes_twin_every_chain_per_gate(problems, roster):
    plan = plan_campaign(config(problems={"ids": [RMS]}, chains={"hops": 3, "baselines": 1}, interventions=[
        {"kind": "containment_probe", "gates": ["none", "remove"], "within": 2}]), problems, roster, False)
    chain = f"smollm2/{RMS}/chain"
    assert [plan.by_id(f"{chain}{c}/h0").arm_name for c in range(3)] == [None, "chain0~probe",
                                                                         "chain0~probe-gate-remove"]
    assert parse_arm("chain0~probe").label == "probe, no gate"
    assert parse_arm("chain0~probe-gate-remove").mode == "remove"
    assert len(plan) == 3 * 3 + 2      # one baseline per DSL of the plain chain, none for the probes
    named = parse_arm("chain0~probe_gaming-gate-remove")
    assert (named.kind, named.probe, named.mode, named.label) == ("containment_probe", "gaming", "remove",
                                                                  "probe gaming, gate (remove)")
    with pytest.raises(ValueError, match="needs a `chains:` section of at least 2 hops"):
        config(chains={"hops": 1}, interventions=[{"kind": "containment_probe"}])
