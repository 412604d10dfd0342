"""Single-hop benchmark metrics (analysis/cells.py, ladder.py, paired.py) on a hand-built run whose every number is
worked out by hand below."""
from __future__ import annotations

import math
from typing import Optional

import pytest

from mkb_ray.analysis.cells import Attempt, CellReplicate, cell_replicates
from mkb_ray.analysis.ladder import contrast, coverage, ladder
from mkb_ray.analysis.paired import PairingRules, outcome, paired_table


def row(trial: str, model: str, problem: str, arm_name: str, tier: Optional[str], kernel: Optional[float] = None,
        eager: Optional[float] = 1.0, status: str = "completed", replicate: int = 0) -> dict:
    dsl = arm_name.split("_")[1] if arm_name.startswith("solo") else arm_name.split("2")[1].split("_")[0]
    speed = eager / kernel if kernel and eager else None
    return {"trial_id": trial, "model": model, "problem_id": problem, "dsl": dsl, "target": "gpu",
            "arm": "solo" if arm_name.startswith("solo") else "skill", "kind": "benchmark", "replicate": replicate,
            "arm_name": arm_name, "status": status, "final_tier": tier, "f_speedup": speed, "f_kernel_ms": kernel,
            "f_eager_ms": eager, "stop_reason": None, "error": None, "skill_sha": None}


def a(tier: Optional[str], kernel: Optional[float] = None, eager: Optional[float] = 1.0,
      status: str = "completed") -> Attempt:
    return Attempt("t", status, tier, (eager / kernel) if kernel and eager else None, kernel, eager)


def cr(source: Attempt, base: Attempt, skill: Attempt, problem: str = "mlp_norm/p1", direction: str = "cutedsl2tirx",
       model: str = "m", replicate: int = 0) -> CellReplicate:
    return CellReplicate(model, "gpu", problem, problem.split("/")[0], direction, replicate, source, base, skill)


# Model m, eager time 1 ms everywhere. Cells (direction cutedsl2tirx unless said), outcome with the default GPU noise
# (0.92; 0.05 gives the same):
#   P1  base fail            skill pass 0.5 ms   -> help   log ratio log(1/0.5)   =  0.6931
#   P2  base pass 0.50 ms    skill pass 0.25 ms  -> help   log(0.5/0.25)          =  0.6931
#   P3  base pass 0.50 ms    skill pass 0.49 ms  -> neutral (0.5/0.49 = 1.020 < 1.05)   log(0.5/0.49) = 0.0202
#   P4  base pass 0.25 ms    skill fail          -> harm   log(0.25/1)            = -1.3863
#   P5  skill skipped (its source wrote no SKILL.md) -> neutral, log ratio 0
# T = 2/5 = 0.4, H = 1/5 = 0.2, neutral 0.4; ΔGM = exp((0.693147+0.693147+0.020203-1.386294+0)/5) - 1
#   = exp(0.0040405) - 1 = 0.004049 (the two ratio-2 helps and the ratio-1/4 harm cancel; P3 is what is left)
FIXTURE = [
    cr(a("pass", 0.5), a("fail"), a("pass", 0.5), "mlp_norm/p1"),
    cr(a("pass", 0.5), a("pass", 0.5), a("pass", 0.25), "mlp_norm/p2"),
    cr(a("fail"), a("pass", 0.5), a("pass", 0.49), "mlp_norm/p3"),
    cr(a("pass2x", 0.25), a("pass", 0.25), a("fail"), "attention/p4"),
    cr(a("fail"), a("pass", 0.5), a(None, status="skipped"), "attention/p5"),
]


def test_outcomes_by_hand():
    assert [outcome(c) for c in FIXTURE] == ["help", "help", "neutral", "harm", "neutral"]
    # With no noise allowance, P3's 2 % gain counts as help.
    assert outcome(FIXTURE[2], PairingRules(noise=0.0)) == "help"


def test_help_harm_and_dgm_overall_by_hand():
    table = paired_table(FIXTURE, by=(), n_boot=0)
    assert table.height == 1
    r = table.row(0, named=True)
    assert (r["n_cells"], r["n_pairs"], r["n_help"], r["n_harm"], r["n_neutral"]) == (5, 5, 2, 1, 2)
    assert (r["T"], r["H"], r["neutral"]) == pytest.approx((0.4, 0.2, 0.4))
    mean_log = (math.log(2) + math.log(2) + math.log(0.5 / 0.49) + math.log(0.25) + 0.0) / 5
    assert r["dgm"] == pytest.approx(math.exp(mean_log) - 1)
    assert r["dgm"] == pytest.approx(0.004049, abs=1e-6)
    assert r["T_lo"] is None and r["dgm_lo"] is None


def test_groups_by_family_and_a_failed_attempts_fallback_time():
    table = paired_table(FIXTURE, by=("family",), n_boot=0)
    fam = {r["family"]: r for r in table.iter_rows(named=True)}
    # mlp_norm: P1-P3 -> T 2/3, H 0; attention: P4, P5 -> T 0, H 1/2, ΔGM exp((log 0.25 + 0)/2) - 1 = -0.5
    assert fam["mlp_norm"]["T"] == pytest.approx(2 / 3) and fam["mlp_norm"]["H"] == 0
    assert fam["attention"]["H"] == pytest.approx(0.5) and fam["attention"]["dgm"] == pytest.approx(-0.5)
    # A failed attempt that never compiled has no eager time of its own: the problem's median eager time stands in
    # (1 ms, from the other attempts of P4); with fail_factor 2 its end-to-end time is 2 ms: ΔGM of P4 alone
    # = 0.25 / 2 - 1.
    p4 = [cr(a("pass2x", 0.25), a("pass", 0.25), a("fail", eager=None), "attention/p4")]
    only = paired_table(p4, by=(), rules=PairingRules(fail_factor=2.0), n_boot=0).row(0, named=True)
    assert only["dgm"] == pytest.approx(0.25 / 2 - 1)


def test_a_fail_against_a_fail_is_no_change_whatever_eager_time_each_verdict_measured():
    """Issue 27: each verdict measures eager itself (the cached baseline is re-measured now and then), so two
    failed attempts carry different eager times; their end-to-end times are one problem-level eager time (the
    median over the run's attempts: 1.0, 1.0, 1.2 -> 1.0), so the pair's log ratio is exactly 0."""
    fails = [cr(a("pass", 0.5, eager=1.0), a("fail", eager=1.0), a("fail", eager=1.2), "mlp_norm/p1")]
    r = paired_table(fails, by=(), n_boot=0).row(0, named=True)
    assert r["dgm"] == 0.0 and r["n_neutral"] == 1
    # A pass against a fail still counts the pass's time against that same eager time: base fail, skill pass at
    # 0.5 ms -> log(1.0 / 0.5), although the skill's own verdict read eager as 1.2 ms.
    mixed = [cr(a("pass", 0.5, eager=1.0), a("fail", eager=1.0), a("pass", 0.5, eager=1.2), "mlp_norm/p1")]
    assert paired_table(mixed, by=(), n_boot=0).row(0, named=True)["dgm"] == pytest.approx(1.0)


def test_bootstrap_intervals_contain_the_estimate():
    many = FIXTURE * 4  # same cells repeated under distinct problem ids, so the bootstrap has 20 cells to draw
    many = [cr(c.source, c.base, c.skill, f"{c.family}/q{i}") for i, c in enumerate(many)]
    r = paired_table(many, by=(), n_boot=500, seed=1).row(0, named=True)
    assert r["T_lo"] <= r["T"] <= r["T_hi"] and r["T_lo"] < r["T_hi"]
    assert r["dgm_lo"] <= r["dgm"] <= r["dgm_hi"]


def test_replicates_are_averaged_within_their_cell_before_the_mean_over_cells():
    # One cell with two replicates (help at ratio 2, neutral at ratio 1) and one cell with one harm at ratio 1/4:
    # cell logs: (log 2 + 0) / 2 = 0.3466 and log 0.25 = -1.3863; ΔGM = exp((0.3466 - 1.3863) / 2) - 1.
    reps = [cr(a("pass", 1), a("pass", 0.5), a("pass", 0.25), "mlp_norm/p1", replicate=0),
            cr(a("pass", 1), a("pass", 0.5), a("pass", 0.5), "mlp_norm/p1", replicate=1),
            cr(a("pass", 1), a("pass", 0.25), a("pass", 1.0), "mlp_norm/p2")]
    r = paired_table(reps, by=(), n_boot=0).row(0, named=True)
    assert (r["n_cells"], r["n_pairs"], r["n_help"], r["n_harm"]) == (2, 3, 1, 1)
    assert r["dgm"] == pytest.approx(math.exp((math.log(2) / 2 + math.log(0.25)) / 2) - 1)


def test_unresolved_cells_are_left_out():
    broken = cr(a("pass", 0.5), a(None, status="infra_error"), a("pass", 0.5), "mlp_norm/p9")
    assert not broken.resolved
    assert paired_table([*FIXTURE, broken], by=(), n_boot=0)["n_cells"][0] == 5


def test_ladder_and_lift_by_hand():
    # Over the five resolved cells: base passes P2, P3, P4, P5 with speedups 2, 2, 4, 2 -> R@0 = 4/5, R@0.5 = 4/5,
    # R@1 = 4/5, R@2 = 4/5, R@4 = 1/5; S = 100 * (0.8*4 + 0.2)/5 = 68. The skill arm counts P5's skipped skill as
    # its base: passes P1 (2), P2 (4), P3 (2.04), P5 (2) -> R@0..R@2 = 4/5, R@4 = 1/5: S = 68, lift 0 on every rung.
    base = ladder([c.base for c in FIXTURE])
    assert base == pytest.approx({"R@0": 0.8, "R@0.5": 0.8, "R@1": 0.8, "R@2": 0.8, "R@4": 0.2, "S": 68.0})
    both = contrast(FIXTURE)
    assert both["skill"] == pytest.approx(base) and all(v == pytest.approx(0) for v in both["lift"].values())
    assert coverage(FIXTURE) == pytest.approx({"source_coverage": 0.6, "skill_coverage": 0.8})


def test_cell_replicates_pair_the_arms_of_stored_rows():
    rows = [row("m/mlp_norm/p1/r0/solo_cutedsl", "m", "mlp_norm/p1", "solo_cutedsl", "pass", 0.5),
            row("m/mlp_norm/p1/r0/solo_tirx", "m", "mlp_norm/p1", "solo_tirx", "fail", None),
            row("m/mlp_norm/p1/r0/cutedsl2tirx_skill", "m", "mlp_norm/p1", "cutedsl2tirx_skill", "pass", 0.5),
            row("m/mlp_norm/p1/r0/tirx2cutedsl_skill", "m", "mlp_norm/p1", "tirx2cutedsl_skill", None,
                status="planned")]
    cells = {c.direction: c for c in cell_replicates(rows)}
    forward, reverse = cells["cutedsl2tirx"], cells["tirx2cutedsl"]
    assert forward.resolved and outcome(forward) == "help"
    assert forward.source.trial_id.endswith("solo_cutedsl") and forward.base.trial_id.endswith("solo_tirx")
    # The reverse cell's source is the tirx solo and its base the cutedsl one; its skill has not run.
    assert reverse.source.trial_id.endswith("solo_tirx") and reverse.skill is None and not reverse.resolved


def test_relative_standing_by_hand():
    from mkb_ray.analysis.standing import standing, standing_table

    # The paper's grouping, source vs the pair's own base: P1 pass > fail: above (help); P2 pass = pass: same
    # (help); P3 fail < pass: below (neutral); P4 pass2x > pass: above (harm); P5 fail < pass: below (neutral,
    # skipped).
    assert [standing(c) for c in FIXTURE] == ["above", "same", "below", "above", "below"]
    table = {r["standing"]: r for r in standing_table(FIXTURE, by=(), draw="paper").iter_rows(named=True)}
    assert (table["above"]["n"], table["above"]["help_rate"], table["above"]["harm_rate"]) == (2, 0.5, 0.5)
    assert (table["same"]["n"], table["same"]["help_rate"], table["same"]["harm_rate"]) == (1, 1.0, 0.0)
    assert (table["below"]["n"], table["below"]["help_rate"], table["below"]["harm_rate"]) == (2, 0.0, 0.0)
    # The default draw needs another replicate of the cell: every FIXTURE cell has one, so none is placed.
    default = {r["standing"]: r for r in standing_table(FIXTURE, by=()).iter_rows(named=True)}
    assert all(default[s]["n"] == 0 and default[s]["n_unplaced"] == 5 for s in ("above", "same", "below"))


def test_standing_draws_the_base_of_another_replicate_not_the_one_the_skill_is_compared_with():
    """Issue 27: one cell, three replicates, source always pass. The bases are fail, pass, pass2x; each skill
    passes at 0.5 ms. Replicate r's standing compares its source with replicate r+1's base (cyclically):
      r0: base fail (skill: help);          standing vs r1's base pass   -> same
      r1: base pass 0.5 ms (skill: neutral); standing vs r2's base pass2x -> below
      r2: base pass2x 0.25 ms (skill: harm); standing vs r0's base fail   -> above
    The paper's grouping (vs the own base) reads r0 above/help, r1 same/neutral, r2 below/harm: the
    'above helps, below harms' pattern, made by the base alone; the independent draw reverses it here."""
    from mkb_ray.analysis.pairs import score_pairs
    from mkb_ray.analysis.standing import standing_table

    reps = [cr(a("pass", 0.5), a("fail"), a("pass", 0.5), replicate=0),
            cr(a("pass", 0.5), a("pass", 0.5), a("pass", 0.5), replicate=1),
            cr(a("pass", 0.5), a("pass2x", 0.25), a("pass", 0.5), replicate=2)]
    scored = score_pairs(reps)
    assert [p.outcome for p in scored] == ["help", "neutral", "harm"]
    assert [p.standing for p in scored] == ["same", "below", "above"]
    assert [p.paper_standing for p in scored] == ["above", "same", "below"]
    assert [p.standing_base.tier for p in scored] == ["pass", "pass2x", "fail"]
    ours = {r["standing"]: r for r in standing_table(scored, by=()).iter_rows(named=True)}
    assert (ours["above"]["n"], ours["above"]["harm_rate"]) == (1, 1.0)
    assert (ours["same"]["n"], ours["same"]["help_rate"]) == (1, 1.0)
    assert (ours["below"]["n"], ours["below"]["help_rate"], ours["below"]["harm_rate"]) == (1, 0.0, 0.0)
    paper = {r["standing"]: r for r in standing_table(scored, by=(), draw="paper").iter_rows(named=True)}
    assert (paper["above"]["help_rate"], paper["below"]["harm_rate"]) == (1.0, 1.0)
    # The same as two gaps (help above − help below, harm below − harm above): the paper's grouping reads the full
    # "above helps, below harms" pattern (1, 1); the independent draw reads help gap 0 − 0 and harm gap 0 − 1.
    from mkb_ray.analysis.standing import standing_gaps

    assert standing_gaps(scored, draw="paper", n_boot=0).select("help_gap", "harm_gap").row(0) == (1.0, 1.0)
    assert standing_gaps(scored, n_boot=0).select("help_gap", "harm_gap").row(0) == (0.0, -1.0)


def test_a_pass_slower_than_eager_against_a_fail():
    """Issue 27: base passes at 2 ms (0.5× eager), the skill fails. T/H: harm (a pass beats a fail). ΔGM: the pass
    runs at min(kernel, eager) = 1 ms, the fail falls back to eager (1 ms): the pair's term is 0, never the +log 2
    it was when a slow pass counted its own time; with fail_factor 1.5 the fail is worse: log(1 / 1.5) < 0."""
    pair = [cr(a("pass", 0.5), a("pass", 2.0), a("fail"), "mlp_norm/p1")]
    r = paired_table(pair, by=(), n_boot=0).row(0, named=True)
    assert r["n_harm"] == 1 and r["dgm"] == 0.0
    strict = paired_table(pair, by=(), rules=PairingRules(fail_factor=1.5), n_boot=0).row(0, named=True)
    assert strict["dgm"] == pytest.approx(1 / 1.5 - 1)
    # The paper's unclipped reading, kept as a rule: the slow pass counts its own 2 ms against the fail's 1 ms,
    # ΔGM log(2 / 1) > 0 where T/H say harm.
    unclipped = paired_table(pair, by=(), rules=PairingRules(slow_pass_runs_eager=False), n_boot=0)
    assert unclipped.row(0, named=True)["dgm"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="fail_factor"):
        PairingRules(fail_factor=0.5)


@pytest.mark.parametrize("fail_factor", [1.0, 1.3])
def test_dgm_never_opposes_help_and_harm_on_one_pair(fail_factor):
    """The order T/H and ΔGM share (analysis/outcomes.py): for every base and skill among fail and passes at many
    speeds (eager 1 ms), a pair T/H call help has a ΔGM term ≥ 0 and a harmed one ≤ 0."""
    from mkb_ray.analysis.outcomes import log_ratio

    rules = PairingRules(fail_factor=fail_factor)
    attempts = [a("fail")] + [a("pass" if k > 0.5 else "pass2x", k) for k in (0.1, 0.3, 0.5, 0.9, 1.0, 1.1, 2.0, 8.0)]
    seen = set()
    for base in attempts:
        for skill in attempts:
            pair = cr(a("pass", 0.5), base, skill)
            result, term = outcome(pair, rules), log_ratio(pair, 1.0, rules)
            seen.add(result)
            assert (result != "help" or term >= 0) and (result != "harm" or term <= 0), (base, skill, result, term)
            if not base.passed and skill.passed:
                assert term > 0 or fail_factor == 1.0 and skill.kernel_ms >= 1.0
    assert seen == {"help", "harm", "neutral"}


def test_reverse_direction_coupling_by_hand():
    from mkb_ray.analysis.reverse import reverse_table

    # Three problems seen in both directions. q1: help forward, harm in reverse; q2: help forward, help in
    # reverse; q3: harm forward, help in reverse. Given help: cutedsl2tirx has 2 (q1, q2) -> reverse harm 1/2,
    # help 1/2; tirx2cutedsl has 2 (q2, q3) -> its reverses (forward q2 help, forward q3 harm): help 1/2, harm 1/2.
    help_, harm = (a("pass", 0.5), a("fail"), a("pass", 0.5)), (a("pass", 0.5), a("pass", 0.5), a("fail"))
    cells = [cr(*help_, "mlp_norm/q1", "cutedsl2tirx"), cr(*harm, "mlp_norm/q1", "tirx2cutedsl"),
             cr(*help_, "mlp_norm/q2", "cutedsl2tirx"), cr(*help_, "mlp_norm/q2", "tirx2cutedsl"),
             cr(*harm, "mlp_norm/q3", "cutedsl2tirx"), cr(*help_, "mlp_norm/q3", "tirx2cutedsl"),
             cr(*help_, "mlp_norm/q4", "cutedsl2tirx")]   # q4 has no reverse: left out
    table = {r["direction"]: r for r in reverse_table(cells, by=()).iter_rows(named=True)}
    forward = table["cutedsl2tirx"]
    assert (forward["n_given"], forward["n_help"], forward["n_harm"], forward["share_harm"]) == (2, 1, 1, 0.5)
    assert table["tirx2cutedsl"]["n_given"] == 2 and table["tirx2cutedsl"]["share_help"] == 0.5
    with pytest.raises(ValueError, match="direction"):
        reverse_table(cells, by=("direction",))


def test_category_enrichment_by_hand():
    from dataclasses import replace

    from mkb_ray.analysis.enrichment import enrichment_table

    # Helped cells' source skills: s1 {closure}, s2 {census}; harmed: s3 {closure, census}, s4 {closure}, and one
    # whose skill was never annotated (left out). Closure: presence harm 2/2 - help 1/2 = +0.5; census: 1/2 - 1/2 = 0.
    def with_skill(c: CellReplicate, sha: str) -> CellReplicate:
        return replace(c, source=replace(c.source, skill_sha=sha))

    help_, harm = (a("pass", 0.5), a("fail"), a("pass", 0.5)), (a("pass", 0.5), a("pass", 0.5), a("fail"))
    cells = [with_skill(cr(*help_, "mlp_norm/q1"), "s1"), with_skill(cr(*help_, "mlp_norm/q2"), "s2"),
             with_skill(cr(*harm, "mlp_norm/q3"), "s3"), with_skill(cr(*harm, "mlp_norm/q4"), "s4"),
             with_skill(cr(*harm, "mlp_norm/q5"), "unannotated")]
    categories = {"s1": frozenset({"unsupported_closure"}), "s2": frozenset({"workload_census"}),
                  "s3": frozenset({"unsupported_closure", "workload_census"}), "s4": frozenset({"unsupported_closure"})}
    table = enrichment_table(cells, categories, ["unsupported_closure", "workload_census"], by=(), n_boot=200)
    rows = {r["category"]: r for r in table.iter_rows(named=True)}
    closure = rows["unsupported_closure"]
    assert (closure["n_help"], closure["n_harm"]) == (2, 2)
    assert (closure["presence_help"], closure["presence_harm"], closure["enrichment"]) == (0.5, 1.0, 0.5)
    assert closure["enrichment_lo"] <= 0.5 <= closure["enrichment_hi"]
    assert rows["workload_census"]["enrichment"] == 0.0


def test_ladder_table_by_hand():
    from mkb_ray.analysis.ladder import ladder_table

    # By family. mlp_norm (P1-P3): base passes P2, P3 at 2x -> R@0..R@2 = 2/3, R@4 = 0, S = 100*(4*(2/3))/5 = 53.33;
    # skill passes P1 (2x), P2 (4x), P3 (2.04x) -> R@0..R@2 = 1, R@4 = 1/3, S = 100*(4 + 1/3)/5 = 86.67; lift 33.33.
    table = {r["family"]: r for r in ladder_table(FIXTURE, by=("family",), n_boot=200).iter_rows(named=True)}
    mlp = table["mlp_norm"]
    assert mlp["base_S"] == pytest.approx(160 / 3) and mlp["skill_S"] == pytest.approx(260 / 3)
    assert mlp["lift_S"] == pytest.approx(100 / 3) and mlp["lift_R@4"] == pytest.approx(1 / 3)
    assert mlp["lift_S_lo"] <= mlp["lift_S"] <= mlp["lift_S_hi"]
    assert (mlp["n_cells"], mlp["source_coverage"]) == (3, pytest.approx(2 / 3))


def test_failure_attribution_rules_by_hand():
    from dataclasses import replace

    from mkb_ray.analysis.attribution import attribute, attribution_table

    src, base = a("pass", 0.5), a("pass", 0.5)

    def harmed(skill: Attempt, **kw) -> CellReplicate:
        return cr(src, base, replace(skill, **kw))

    noise = PairingRules(noise=0.05)
    # Both pass, skill 0.53 ms vs base 0.5: ratio 1.06 > 1.05 (harm) but <= 1.05^2 = 1.1025 -> measurement noise.
    assert attribute(harmed(a("pass", 0.53), stop_reason="finished"), None, noise) == "measurement_noise"
    assert attribute(harmed(a("fail"), stop_reason="finished", compiled=False), None) == "execution_error"
    assert attribute(harmed(a("fail"), stop_reason="tokens"), None) == "budget_exhaustion"
    assert attribute(harmed(a("fail"), stop_reason="submissions"), None) == "search_truncation"
    # Stopped for another reason (an LLM error) with a kernel that did not compile, after a skill full of source-DSL
    # details: the transfer; with unsupported closures instead: their adoption; with neither: unattributed.
    failed = dict(stop_reason="llm_error", compiled=False)
    assert attribute(harmed(a("fail"), **failed), frozenset({"dsl_specific_detail"})) == "dsl_mismatch_transfer"
    assert attribute(harmed(a("fail"), **failed), frozenset({"unsupported_closure"})) == "unverified_adoption"
    assert attribute(harmed(a("fail"), **failed), frozenset({"workload_census"})) == "unattributed"
    # The table counts harmed cell-replicates only: FIXTURE's one harm (P4: skill fail, stop reason unknown, no
    # annotated source) is unattributed.
    table = attribution_table(FIXTURE, {}, by=())
    assert table.to_dicts() == [{"cause": "unattributed", "n": 1, "share": 1.0}]


def test_a_cells_source_may_sit_on_the_other_target():
    # The quickstart on a machine without a GPU: CuTe DSL solos judged on the GPU target (compile only), TIRx ones
    # and the cutedsl2tirx skill attempt on the CPU target. The cell is on the CPU target, with the GPU-target
    # CuTe solo as its source; no CPU-target cutedsl attempt exists, so tirx2cutedsl is a GPU-target cell.
    rows = [row("m/p/r0/solo_cutedsl", "m", "mlp_norm/p", "solo_cutedsl", "compile_only"),
            row("m/p/r0/solo_tirx", "m", "mlp_norm/p", "solo_tirx", "fail"),
            row("m/p/r0/cutedsl2tirx_skill", "m", "mlp_norm/p", "cutedsl2tirx_skill", "pass", 0.5)]
    rows[0]["target"] = "gpu"
    rows[1]["target"] = rows[2]["target"] = "cpu"
    cells = {(c.direction, c.target): c for c in cell_replicates(rows)}
    forward = cells["cutedsl2tirx", "cpu"]
    assert forward.resolved and forward.source.trial_id == "m/p/r0/solo_cutedsl" and outcome(forward) == "help"
    reverse = cells["tirx2cutedsl", "gpu"]
    assert reverse.source.trial_id == "m/p/r0/solo_tirx" and reverse.skill is None and not reverse.resolved
    assert set(cells) == {("cutedsl2tirx", "cpu"), ("tirx2cutedsl", "gpu")}
