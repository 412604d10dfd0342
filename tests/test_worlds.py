"""Per-problem difficulty, model × problem effects and in-memory worlds (issue 27, item 5): the logit shift keeps old
draws bit for bit at 0 and moves tiers the way its definition says; a world has the shape of a benchmark run, is
deterministic, reads as the analysis's objects, and its null law (skills do nothing) shows no skill effect."""
from __future__ import annotations

import math
import statistics
from collections import Counter

import pytest

from mkb_ray.analysis.cells import Attempt, CellReplicate
from mkb_ray.analysis.paired import outcome, paired_table
from mkb_ray.records import Trial
from mkb_ray.synthetic import synthetic_outcome
from mkb_ray.synthetic.outcome_draw import problem_effect, shift_tiers, tier_probabilities
from mkb_ray.synthetic.spec import ModelEffect, PerModel, SyntheticSpec, TierOverrides, TierProbs
from mkb_ray.synthetic.worlds import DrawnCell, World, draw_world, null_spec, problem_names

MODELS = ("m0", "m1", "m2")
# A model of its own tiers and knobs, so null_spec has per_model entries to neutralise.
PER_MODEL = PerModel({"m1": ModelEffect(tiers=TierOverrides(tirx_solo=TierProbs(fail=0.4, pass_=0.4, pass2x=0.2)),
                                        skill_help_shift=0.3, closure_harm_per_claim=0.1)})


def _logit(q: float) -> float:
    return math.log(q / (1.0 - q))


def _cell_index(world: World) -> dict[tuple[str, str, str, int], DrawnCell]:
    return {(c.model, c.problem_id, c.direction, c.replicate): c for c in world.cells}


# --- the shift ----------------------------------------------------------------------------------------------------

def test_zero_effects_leave_every_tier_table_as_it_was() -> None:
    spec = SyntheticSpec(per_model=PER_MODEL)
    for model in (None, "m0", "m1"):
        for dsl in ("cutedsl", "tirx"):
            assert tier_probabilities(spec, dsl, "solo", model=model, problem_effect=0.0) \
                is spec.effect(model).solo[dsl]
            for k, n, passed in ((0, 5, False), (2, 8, True), (5, 5, True)):
                args = dict(closure_share=k / n, closure_claims=k, source_passed=passed, model=model)
                assert tier_probabilities(spec, dsl, "skill", **args, problem_effect=0.0) \
                    == tier_probabilities(spec, dsl, "skill", **args)
    # By hand, defaults: delta = 0.05 + 0.20 - 0.60 * 2/8 = 0.10 of cutedsl's fail 0.55 moves to pass : pass2x 2 : 1.
    skill = tier_probabilities(spec, "cutedsl", "skill", closure_share=0.25, closure_claims=2, source_passed=True)
    assert (skill.fail, skill.pass_, skill.pass2x) == pytest.approx((0.495, 0.30 + 0.055 * 2 / 3, 0.15 + 0.055 / 3))
    assert problem_effect(0, "m0", "p", 0.0, 0.0) == 0.0
    assert "problem_difficulty_sigma" not in spec.model_dump() and "model_problem_sigma" not in spec.model_dump()
    assert SyntheticSpec(model_problem_sigma=0.5).model_dump()["model_problem_sigma"] == 0.5


def test_shift_moves_both_thresholds_by_e_on_the_logit_scale() -> None:
    probs = TierProbs(fail=0.55, pass_=0.30, pass2x=0.15)
    assert shift_tiers(probs, 0.0) is probs
    for e in (-3.0, -0.5, 0.7, 2.0):
        moved = shift_tiers(probs, e)
        assert moved.fail + moved.pass_ + moved.pass2x == pytest.approx(1.0, abs=1e-12)
        assert min(moved.fail, moved.pass_, moved.pass2x) >= 0
        assert _logit(moved.pass_ + moved.pass2x) - _logit(0.45) == pytest.approx(e)
        assert _logit(moved.pass2x) - _logit(0.15) == pytest.approx(e)
        assert ((moved.pass_ + moved.pass2x) > 0.45) == (e > 0)
    easy, hard = shift_tiers(probs, 40.0), shift_tiers(probs, -40.0)
    assert easy.pass2x > 1 - 1e-12 and hard.fail > 1 - 1e-12


@pytest.mark.parametrize("entry", [(1.0, 0.0, 0.0), (0.0, 0.0, 1.0), (0.0, 1.0, 0.0), (0.5, 0.5, 0.0)])
def test_shift_keeps_certain_tiers_and_never_makes_nan(entry: tuple[float, float, float]) -> None:
    probs = TierProbs(fail=entry[0], pass_=entry[1], pass2x=entry[2])
    for e in (-1000.0, -2.0, 2.0, 1000.0):
        moved = shift_tiers(probs, e)
        values = (moved.fail, moved.pass_, moved.pass2x)
        assert not any(math.isnan(v) for v in values) and sum(values) == pytest.approx(1.0)
        # A threshold probability of 0 or 1 is an infinite logit: no finite shift moves it.
        if entry[2] in (0.0, 1.0):
            assert moved.pass2x == entry[2]
        if entry[0] in (0.0, 1.0):
            assert moved.fail == entry[0]


def test_problem_effect_is_shared_by_models_deterministic_and_of_the_given_spread() -> None:
    assert problem_effect(3, "a", "fam0/00_p", 1.5, 0.0) == problem_effect(3, "b", "fam0/00_p", 1.5, 0.0) != 0.0
    assert problem_effect(3, "a", "fam0/00_p", 1.5, 0.5) != problem_effect(3, "b", "fam0/00_p", 1.5, 0.5)
    first = problem_effect(3, "a", "fam1/01_p", 1.5, 0.5)
    problem_effect.cache_clear()
    assert problem_effect(3, "a", "fam1/01_p", 1.5, 0.5) == first
    assert problem_effect(4, "a", "fam1/01_p", 1.5, 0.5) != first          # another seed, another problem draw
    # Difficulty alone: the model's part is 0, so (d + u) - d is 0 exactly for model_problem_sigma 0.
    draws = [problem_effect(9, "a", p, 2.0, 0.0) for p in problem_names(2000)]
    assert statistics.fmean(draws) == pytest.approx(0.0, abs=4 * 2.0 / math.sqrt(2000))
    assert statistics.stdev(draws) == pytest.approx(2.0, rel=0.08)


def test_synthetic_outcome_applies_the_problem_effect() -> None:
    spec = SyntheticSpec(problem_difficulty_sigma=3.0)
    effects = {p: problem_effect(spec.seed, "m", p, 3.0, 0.0) for p in problem_names(60)}
    hard = min(effects, key=effects.__getitem__)
    easy = max(effects, key=effects.__getitem__)
    assert effects[hard] < -3 and effects[easy] > 3

    def passes(problem: str) -> int:
        trials = [Trial(trial_id=f"m/{problem}/r{k}/solo_tirx", model="m", problem_id=problem, dsl="tirx",
                        target="gpu", arm="solo", kind="benchmark", replicate=k) for k in range(40)]
        return sum(synthetic_outcome(t, None, spec).final_tier in ("pass", "pass2x") for t in trials)
    # TIRx solo passes 35%: logit -0.62, so P(pass) < 2.5% at e < -3 and > 91% at e > 3.
    assert passes(hard) <= 5 and passes(easy) >= 30


# --- worlds -------------------------------------------------------------------------------------------------------

def test_world_has_the_shape_of_a_benchmark_run_and_is_deterministic() -> None:
    spec = SyntheticSpec(problem_difficulty_sigma=1.0, model_problem_sigma=0.5)
    world = draw_world(spec, MODELS, 12, 3, seed=5)
    assert len(world.cells) == len(MODELS) * 12 * 2 * 3
    assert len(world.categories_of) == len(MODELS) * 12 * 2 * 3          # one source SKILL.md per solo attempt
    assert draw_world(spec, MODELS, 12, 3, seed=5) == world
    assert draw_world(spec, MODELS, 12, 3, seed=6) != world
    index = _cell_index(world)
    for (model, problem, direction, r), cell in index.items():
        reverse = index[model, problem, "tirx2cutedsl" if direction == "cutedsl2tirx" else "cutedsl2tirx", r]
        assert cell.base is reverse.source and cell.source is reverse.base
        assert cell.family == problem.split("/")[0] and cell.target == "gpu"
        assert cell.source.eager_ms == cell.base.eager_ms == cell.skill.eager_ms
        assert cell.source.skill_sha in world.categories_of
        for a in (cell.source, cell.base, cell.skill):
            assert (a.kernel_ms is None) == (a.tier == "fail") == (a.speedup is None)
            if a.tier == "pass":
                assert 0 < a.speedup < 2
            if a.tier == "pass2x":
                assert a.speedup >= 2
    assert {c.family for c in world.cells} == {f"fam{i}" for i in range(6)}
    closure = Counter(next(iter(s)) for s in world.categories_of.values())
    assert set(closure) == {"unsupported_closure", "other"}


def test_world_reads_as_the_analysis_objects() -> None:
    world = draw_world(SyntheticSpec(), MODELS, 6, 2, seed=1)
    replicates = world.replicates(Attempt, CellReplicate)
    assert all(isinstance(cr, CellReplicate) and cr.resolved for cr in replicates)
    assert all(cr.source.passed == (cr.source.tier != "fail") and cr.source.synthetic for cr in replicates)
    by_key = {(cr.model, cr.problem_id, cr.direction, cr.replicate): cr for cr in replicates}
    cr = by_key["m0", "fam0/00_p", "cutedsl2tirx", 0]
    assert cr.base is by_key["m0", "fam0/00_p", "tirx2cutedsl", 0].source
    table = paired_table(replicates, by=("model",), n_boot=50)
    assert table["n_pairs"].to_list() == [6 * 2 * 2] * len(MODELS)


def test_null_spec_makes_every_skill_table_its_solo_one() -> None:
    spec = SyntheticSpec(per_model=PER_MODEL, problem_difficulty_sigma=1.0, closure_harm_per_claim=0.2)
    null = null_spec(spec)
    assert null.problem_difficulty_sigma == 1.0 and null.per_model.get("m1") is not None
    for model in (None, "m0", "m1"):
        before, after = spec.effect(model), null.effect(model)
        assert after.solo == before.solo and after.skill == after.solo
        assert (after.skill_help_shift, after.source_pass_shift, after.closure_harm_per_share,
                after.closure_harm_per_claim) == (0.0, 0.0, 0.0, 0.0)
        for dsl in ("cutedsl", "tirx"):
            assert tier_probabilities(null, dsl, "skill", closure_share=1.0, closure_claims=4, source_passed=True,
                                      model=model, problem_effect=-0.7) \
                == tier_probabilities(null, dsl, "solo", model=model, problem_effect=-0.7)
    assert null.effect("m1").solo["tirx"].pass_ == 0.4                   # the model's own table is kept
    assert SyntheticSpec.model_validate(null.model_dump()) == null       # still a valid spec


def test_null_world_shows_no_skill_effect() -> None:
    # Within-problem differences (skill - base), averaged per problem, so that problem effects shared by the
    # attempts of one problem do not hide in the standard error.
    spec = null_spec(SyntheticSpec(per_model=PER_MODEL, problem_difficulty_sigma=1.0, model_problem_sigma=0.5))
    world = draw_world(spec, MODELS, 300, 2, seed=11)
    per_problem: dict[str, list[float]] = {}
    tiers: dict[str, Counter[str]] = {"skill": Counter(), "base": Counter()}
    for cell in world.cells:
        per_problem.setdefault(cell.problem_id, []).append(cell.skill.passed - cell.base.passed)
        tiers["skill"][cell.skill.tier] += 1
        tiers["base"][cell.base.tier] += 1
    means = [statistics.fmean(v) for v in per_problem.values()]
    se = statistics.stdev(means) / math.sqrt(len(means))
    assert abs(statistics.fmean(means)) < 4 * se
    n = len(world.cells)
    for tier in ("fail", "pass", "pass2x"):
        p = tiers["base"][tier] / n
        # Given its problem's effect, a cell's skill and base tiers are independent draws of one law, and cells'
        # differences are uncorrelated: 2p(1 - p) bounds the variance of each.
        assert abs(tiers["skill"][tier] - tiers["base"][tier]) / n < 4 * math.sqrt(2 * p * (1 - p) / n)
    assert abs(_help_minus_harm_z(world)) < 4


def test_the_null_checks_see_a_real_skill_effect() -> None:
    # The same world law with skills that help: the statistic the null world passes is far outside its bound.
    spec = SyntheticSpec(per_model=PER_MODEL, problem_difficulty_sigma=1.0, model_problem_sigma=0.5,
                         skill_help_shift=0.4)
    assert _help_minus_harm_z(draw_world(spec, MODELS, 300, 2, seed=11)) > 8


def _help_minus_harm_z(world: World) -> float:
    """(help - harm) in standard errors: given its problem's effect, a null cell helps exactly as often as it
    harms, independently of the other cells, so sqrt(help + harm) is the standard error of the difference."""
    results = Counter(outcome(cr) for cr in world.replicates(Attempt, CellReplicate))
    return (results["help"] - results["harm"]) / math.sqrt(results["help"] + results["harm"])


def test_problem_difficulty_spreads_pass_rates_across_problems() -> None:
    def problem_pass_rates(spec: SyntheticSpec) -> tuple[list[float], float]:
        world = draw_world(spec, ("a", "b", "c", "d"), 60, 4, seed=2)
        solos: dict[str, dict[str, bool]] = {}
        for c in world.cells:      # each solo attempt is the source of one cell: count it once
            solos.setdefault(c.problem_id, {})[c.source.trial_id] = c.source.passed
        rates = [statistics.fmean(v.values()) for v in solos.values()]
        return rates, statistics.fmean(rates)

    flat, mean_flat = problem_pass_rates(SyntheticSpec())
    spread, _ = problem_pass_rates(SyntheticSpec(problem_difficulty_sigma=2.0))
    binomial_sd = math.sqrt(mean_flat * (1 - mean_flat) / 32)           # 4 models x 4 replicates x 2 DSLs
    assert statistics.stdev(flat) < 1.5 * binomial_sd                    # only the draws' own noise
    assert statistics.stdev(spread) > 3 * statistics.stdev(flat)


def test_shared_difficulty_correlates_models_and_model_problem_effects_do_not() -> None:
    def correlation(spec: SyntheticSpec) -> float:
        world = draw_world(spec, ("a", "b"), 60, 10, seed=4)
        rate: dict[tuple[str, str], list[bool]] = {}
        for c in world.cells:
            rate.setdefault((c.model, c.problem_id), []).append(c.source.passed)
        problems = problem_names(60)
        return statistics.correlation([statistics.fmean(rate["a", p]) for p in problems],
                                      [statistics.fmean(rate["b", p]) for p in problems])

    assert correlation(SyntheticSpec(problem_difficulty_sigma=2.0)) > 0.6
    assert abs(correlation(SyntheticSpec(model_problem_sigma=2.0))) < 0.4    # ~3 standard errors of 1/sqrt(60)


def test_draw_world_refuses_an_empty_world() -> None:
    with pytest.raises(ValueError, match="n_problems"):
        draw_world(SyntheticSpec(), MODELS, 0, 1, seed=0)


def test_in_a_null_world_the_metrics_show_no_effect_and_the_papers_standing_shows_one() -> None:
    """Issue 27, on one fixed null world with problem effects (6 models × 30 problems × 3 replicates): T ≈ H, ΔGM's
    interval covers 0, the standing gaps under the independent base draw have intervals covering 0 — while the
    paper's grouping (source vs the pair's own base) reads a large 'above helps, below harms' gap from a skill that
    does nothing. (benchmarks/metric_coverage.py repeats this over 200 worlds for coverage.)"""
    from mkb_ray.analysis.pairs import score_pairs
    from mkb_ray.analysis.standing import standing_gaps

    spec = null_spec(SyntheticSpec(problem_difficulty_sigma=1.0, model_problem_sigma=0.5))
    world = draw_world(spec, [f"m{i}" for i in range(6)], 30, 3, seed=11)
    pairs = score_pairs(world.replicates(Attempt, CellReplicate))
    overall = paired_table(pairs, by=(), n_boot=1000).row(0, named=True)
    assert abs(overall["T"] - overall["H"]) < 0.03
    assert overall["dgm_lo"] < 0 < overall["dgm_hi"]
    ours = standing_gaps(pairs, n_boot=1000).row(0, named=True)
    assert ours["help_gap_lo"] < 0 < ours["help_gap_hi"] and ours["harm_gap_lo"] < 0 < ours["harm_gap_hi"]
    paper = standing_gaps(pairs, n_boot=1000, draw="paper").row(0, named=True)
    # (here 0.24 and 0.61, lower bounds 0.17 and 0.53: a pass base can only be beaten by the few percent of pairs
    # that read faster beyond the margin, a failed one only helped)
    assert paper["help_gap_lo"] > 0.1 and paper["harm_gap_lo"] > 0.3
