"""The causal table (analysis/causal.py) on hand-worked pairs, and the planted effect of a pair
(synthetic/planted_causal.py) worked out by hand."""
from __future__ import annotations

from typing import Any, Optional

import pytest

from mkb_ray.analysis.bootstrap import Bootstrap
from mkb_ray.analysis.causal import causal_table, intervention_pairs
from mkb_ray.analysis.outcomes import PairingRules
from mkb_ray.synthetic import render_skill
from mkb_ray.synthetic.planted_causal import TIE, pair_truth
from mkb_ray.synthetic.wordings import WORDINGS
from test_calibration import hand_spec
from test_synthetic import make_claim

RULES = PairingRules(noise=0.1)
EXACT = Bootstrap(n_boot=0)


def row(trial_id: str, arm_name: str, status: str = "completed", tier: Optional[str] = None,
        kernel_ms: Optional[float] = None, stop_reason: Optional[str] = None, kind: str = "intervention",
        arm: str = "skill", dsl: str = "tirx") -> dict[str, Any]:
    model, family, name, replicate = trial_id.split("/")[:4]
    return {"trial_id": trial_id, "model": model, "problem_id": f"{family}/{name}", "dsl": dsl, "target": "cpu",
            "arm": arm, "kind": kind, "replicate": int(replicate[1:]), "chain": None, "hop": None,
            "skill_from": None, "arm_name": arm_name, "status": status, "final_tier": tier, "synthetic": False,
            "error": None, "stop_reason": stop_reason, "f_kernel_ms": kernel_ms, "f_speedup": None,
            "f_eager_ms": 20.0, "f_compiled": None, "f_correct": None, "skill_sha": None}


def cell(prefix: str, base: tuple, control: tuple, treated: Optional[tuple], token: str = "placebo",
         treated_status: str = "completed", control_status: str = "completed",
         treated_stop: Optional[str] = None) -> list[dict[str, Any]]:
    """A cell-replicate's solo base, control skill arm and one intervention twin; (tier, kernel ms) each."""
    rows = [row(f"{prefix}/solo_tirx", "solo_tirx", tier=base[0], kernel_ms=base[1], kind="benchmark", arm="solo"),
            row(f"{prefix}/cutedsl2tirx_skill", "cutedsl2tirx_skill", status=control_status, tier=control[0],
                kernel_ms=control[1], kind="benchmark")]
    tier, ms = treated or (None, None)
    rows.append(row(f"{prefix}/cutedsl2tirx_skill~{token}", f"cutedsl2tirx_skill~{token}", status=treated_status,
                    tier=tier, kernel_ms=ms, stop_reason=treated_stop))
    return rows


def fixture_rows() -> list[dict[str, Any]]:
    return (
        # p1 r0: the twin passes where the control failed: help; against the passing base the control was a harm,
        # the twin neutral (d_H -1).
        cell("m/a/p1/r0", ("pass", 10.0), ("fail", None), ("pass", 10.0))
        # p1 r1: both pass, the twin 1.6x slower: harm; both help against the failed base.
        + cell("m/a/p1/r1", ("fail", None), ("pass", 5.0), ("pass", 8.0))
        # p2 r0: the twin was skipped for an empty hand-off: it stands as the base (pass 10 ms), equal to the control.
        + cell("m/a/p2/r0", ("pass", 10.0), ("pass", 10.0), None, treated_status="skipped",
               treated_stop="empty_source_skill")
        # p2 r1: the control errored: no pair.
        + cell("m/a/p2/r1", ("pass", 10.0), (None, None), ("pass", 1.0), control_status="error")
        # p2 r2: an ablation that removed nothing was not run: a tie, counted as identical.
        + cell("m/a/p2/r2", ("fail", None), ("fail", None), None, token="ablate-claim0", treated_status="skipped",
               treated_stop="identical_hand_off")
        # p1 r2: an ablation that changed the text: the twin passes, the control fails.
        + cell("m/a/p1/r2", ("fail", None), ("fail", None), ("pass", 3.0), token="ablate-claim0"))


def test_the_causal_table_by_hand():
    pairs = intervention_pairs(fixture_rows())
    assert [(p.label, p.problem_id, p.identical) for p in pairs] == [
        ("placebo", "a/p1", False), ("placebo", "a/p1", False), ("placebo", "a/p2", False),
        ("ablate claim 0", "a/p2", True), ("ablate claim 0", "a/p1", False)]
    table = {(r["intervention"], r["model"]): r for r in causal_table(pairs, RULES, EXACT).iter_rows(named=True)}
    assert set(table) == {("placebo", "all"), ("placebo", "m"), ("ablate claim 0", "all"), ("ablate claim 0", "m")}
    placebo = table["placebo", "all"]
    assert (placebo["n"], placebo["n_identical"], placebo["n_changed"]) == (3, 0, 3)
    assert placebo["help"] == pytest.approx(1 / 3) and placebo["harm"] == pytest.approx(1 / 3)
    assert placebo["net"] == pytest.approx(0.0) and placebo["net_changed"] == pytest.approx(0.0)
    assert placebo["d_pass"] == pytest.approx(1 / 3)
    assert placebo["d_T"] == pytest.approx(0.0) and placebo["d_H"] == pytest.approx(-1 / 3)
    assert placebo["net_lo"] is None and placebo["net_hi"] is None    # no resamples asked for
    ablation = table["ablate claim 0", "all"]
    assert (ablation["n"], ablation["n_identical"], ablation["n_changed"]) == (2, 1, 1)
    assert ablation["net"] == pytest.approx(0.5) and ablation["net_changed"] == pytest.approx(1.0)
    assert ablation["d_pass"] == pytest.approx(0.5) and ablation["d_T"] == pytest.approx(0.5)


def test_the_intervals_resample_problems_and_cover_the_estimate():
    rows = []
    for p in range(12):
        for r in range(3):
            treated = ("pass", 10.0) if (p + r) % 3 else ("fail", None)
            rows += cell(f"m/a/p{p}/r{r}", ("pass", 10.0), ("fail", None) if p % 2 else ("pass", 10.0), treated)
    table = causal_table(intervention_pairs(rows), RULES, Bootstrap(n_boot=400, seed=1))
    placebo = table.row(0, named=True)
    assert placebo["n"] == 36 and placebo["net_lo"] < placebo["net"] < placebo["net_hi"]
    assert placebo["net_hi"] - placebo["net_lo"] > 0.05


def test_an_empty_run_has_an_empty_table():
    assert causal_table([], RULES, EXACT).is_empty()
    assert intervention_pairs(cell("m/a/p1/r0", ("pass", 1.0), ("pass", 1.0), None, treated_status="planned")) == []


def closure_skill(with_closure: bool) -> str:
    """A synthetic SKILL.md whose source passed, with one workload claim and, optionally, one unsupported closure."""
    claims = [make_claim("h0-x.00", "workload_census", WORDINGS["workload_census"][0].key)]
    if with_closure:
        claims.append(make_claim("h0-x.01", "unsupported_closure", WORDINGS["unsupported_closure"][0].key))
    return render_skill(claims, attempt="m/a/p/r0/solo_cutedsl", tier="pass")


def test_the_planted_effect_of_a_pair_by_hand():
    """hand_spec: every table fail 0.5 / pass 0.5, no speed spread or noise (two passes read the same), delta =
    0.2 + 0.2 [source passed] - 0.6 k. Control reads one closure from a passing source: delta -0.2, P(pass) 0.4.
    Treated reads it without the closure: delta 0.4, P(pass) 0.7. So help = 0.7 * 0.6 = 0.42, harm = 0.3 * 0.4 =
    0.12, net 0.30, d_pass 0.30. A solo (the budget-matched twin) passes with 0.5: help 0.5 * 0.6, harm 0.5 * 0.4.
    Two empty hand-offs are the same base attempt: a tie."""
    spec = hand_spec()
    truth = pair_truth(spec, "m", "a/p", "tirx", closure_skill(False), closure_skill(True), margin=0.0)
    assert (truth.help, truth.harm, truth.d_pass) == pytest.approx((0.42, 0.12, 0.30))
    assert truth.net == pytest.approx(0.30)
    solo = pair_truth(spec, "m", "a/p", "tirx", None, closure_skill(True), margin=0.0)
    assert (solo.help, solo.harm, solo.d_pass) == pytest.approx((0.30, 0.20, 0.10))
    assert pair_truth(spec, "m", "a/p", "tirx", "", "", margin=0.0) == TIE
    same = pair_truth(spec, "m", "a/p", "tirx", closure_skill(True), closure_skill(True), margin=0.0)
    assert same.net == pytest.approx(0.0) and same.help == pytest.approx(0.4 * 0.6)


def test_gated_against_ungated_chains_by_hand():
    """Two chains of one problem: the plain one copies its closure to every hop and is harmed at hops 1 and 2; its
    gated twin loses the closure at hop 1 (the gate removed it) and ties its baseline. Closure survival at 1 hop:
    1.0 plain, 0.0 gated; closure share of the last hop 1.0 vs 0.0; harm 1.0 vs 0.0, so d_harm -1."""
    from mkb_ray.analysis.chains import chain_variants
    from mkb_ray.analysis.gate_chains import gate_chain_table
    from mkb_ray.analysis.lineage_data import LineageData
    from mkb_ray.analysis.propagation import ClaimNode, HopOutcome
    from mkb_ray.records.claims import LineageEdgeRecord

    plain, gated = "m/a/p/chain0", "m/a/p/chain1"
    node = lambda chain, hop, cid, cat, v="": ClaimNode(chain, hop, cid, cat, "plain", "unsupported",  # noqa: E731
                                                        model="m", start_dsl="tirx", dsl="tirx", variant=v)
    nodes = [node(plain, k, f"c{k}", "unsupported_closure") for k in range(3)]
    nodes += [node(gated, 0, "g0", "unsupported_closure", "gate-remove")]
    nodes += [node(gated, k, f"w{k}", "workload_census", "gate-remove") for k in (1, 2)]
    edge = lambda chain, hop, parent, child: LineageEdgeRecord(chain_id=chain, hop=hop, parent_id=parent,  # noqa: E731
                                                               child_id=child, edge="copied", similarity=1.0,
                                                               matcher="m")
    edges = [edge(plain, 1, "c0", "c1"), edge(plain, 2, "c1", "c2"), edge(gated, 2, "w1", "w2")]
    outcomes = [HopOutcome(plain, k, "fail", "pass", None, 1.0, "cpu") for k in (1, 2)]
    outcomes += [HopOutcome(gated, k, "pass", "pass", 1.0, 1.0, "cpu") for k in (1, 2)]
    rows = [{"kind": "chain_hop", "chain": c, "model": "m", "problem_id": "a/p",
             "arm_name": "chain0~gate-remove" if c else None} for c in (0, 1)]
    variants = chain_variants(rows)
    assert variants == {plain: "", gated: "gate-remove"}
    table = gate_chain_table(LineageData(nodes, edges, outcomes, {}, variants), variants, RULES, n_boot=0)
    none, remove = table.iter_rows(named=True)
    assert (none["gate"], none["chains"], remove["gate"], remove["chains"]) == ("none", 1, "remove", 1)
    assert none["survival_1"] == pytest.approx(1.0) and remove["survival_1"] == pytest.approx(0.0)
    assert none["closure_share_last"] == pytest.approx(1.0) and remove["closure_share_last"] == pytest.approx(0.0)
    assert (none["hops"], none["harm"], none["help"]) == (2, pytest.approx(1.0), pytest.approx(0.0))
    assert (remove["harm"], remove["d_harm"], remove["d_help"]) == (pytest.approx(0.0), pytest.approx(-1.0),
                                                                    pytest.approx(0.0))
    assert none["d_harm"] is None
