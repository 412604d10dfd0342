"""The planted-effect calibration (issue 11, item 7): the rates a synthetic spec plants are derived from the spec
alone (mkb_ray/synthetic/planted.py), worked out by hand on a small spec here; the preset
experiments/synthetic/paper-2610.05014.yaml plants the paper's headline rates; the analysis run on the preset
recovers every planted rate inside its (simultaneous) interval, and a wrongly planted rate falls outside; `mkb
report` shows planted vs recovered side by side, marked synthetic."""
from __future__ import annotations

import math
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from mkb_ray.analysis.calibration import calibration_table, run_spec, truth_categories
from mkb_ray.analysis.cells import cell_replicates, result_rows
from mkb_ray.analysis.enrichment import enrichment_table
from mkb_ray.analysis.outcomes import PairingRules
from mkb_ray.analysis.report.data import source_skill_shas
from mkb_ray.analysis.report.render import ReportOptions, render_report
from mkb_ray.campaign.config import load_experiment
from mkb_ray.store import RunStore
from mkb_ray.synthetic import SyntheticSpec
from mkb_ray.synthetic.planted import claim_counts, planted_rates
from mkb_ray.synthetic.speed import PASS_CEILING, faster_prob, judged_speedup, noise_sigma
from mkb_ray.synthetic.spec import DEFAULT_CATEGORY_WEIGHTS

REPO = Path(__file__).resolve().parents[1]
PRESET = REPO / "experiments" / "synthetic" / "paper-2610.05014.yaml"
NOISE = PairingRules().margin("gpu", True)   # the margin the analysis applies to synthetic attempts (measured)
CLOSURE = "unsupported_closure"


# --- the derivation, by hand ----------------------------------------------------------------------------------------

def hand_spec() -> SyntheticSpec:
    """Every solo and skill table fail 0.5 / pass 0.5 / pass2x 0; no attempt spread and no reading noise, so every
    pass of a problem reads the problem's pass speed and two of them never differ; one claim per SKILL.md, a
    closure with probability 0.25; delta = 0.2 + 0.2 * [source passed] - 0.6 * k (k inherited closures, 0 or 1)."""
    tiers = {"fail": 0.5, "pass": 0.5, "pass2x": 0.0}
    weights = {c: 0.0 for c in DEFAULT_CATEGORY_WEIGHTS} | {CLOSURE: 0.25, "workload_census": 0.75}
    return SyntheticSpec.model_validate({
        "tiers": {f"{d}_{a}": tiers for d in ("cutedsl", "tirx") for a in ("solo", "skill")},
        "pass_speedup_min": 1.5, "attempt_speed_sigma": 0.0, "judge_noise_margin": 0.0,
        "skill_help_shift": 0.2, "source_pass_shift": 0.2, "closure_harm_per_share": 0.0,
        "closure_harm_per_claim": 0.6, "initial_claims_mean": 0, "category_weights": weights})


def test_planted_rates_worked_out_by_hand() -> None:
    """P(skill passes) for (source passed, k): (yes, 0) delta 0.4 -> 0.7; (yes, 1) -0.2 -> 0.4; (no, 0) 0.2 -> 0.6;
    (no, 1) -0.4 -> 0.3. So P(pass | source passed) = 0.75*0.7 + 0.25*0.4 = 0.625, P(pass | source failed) =
    0.75*0.6 + 0.25*0.3 = 0.525, and overall 0.575. Base fail (1/2): help = P(skill passes); base pass: harm =
    P(skill fails). T = 0.5 * 0.575 = 0.2875, H = 0.5 * 0.425 = 0.2125.
    Standing, the paper's grouping (source vs own base): above = (source pass, base fail), 1/4: help 0.625, harm 0;
    below = (fail, pass): help 0, harm 0.475; same (1/2): help (0 + 0.525) / 2 = 0.2625, harm (0.375 + 0) / 2 =
    0.1875. Standing against an independent base draw b' (same law): above = (source pass, b' fail), 1/4, and the
    pair's own base is fail or pass with 1/2 each: help 0.5 * 0.625 = 0.3125, harm 0.5 * 0.375 = 0.1875 (two passes
    of one problem read the same speed); below = (fail, b' pass): help 0.5 * 0.525 = 0.2625, harm 0.5 * 0.475 =
    0.2375; same (1/2): half each: help 0.2875, harm 0.2125 — the 5-point gap above vs below is the planted
    source-pass shift alone, not the 62.5 / 47.5-point gap of the paper's grouping.
    Enrichment: P(help, k=1) = 0.5 * 0.25 * (0.4 + 0.3) / 2 = 0.04375 -> presence | help 0.04375 / 0.2875 = 0.152174;
    P(harm, k=1) = 0.5 * 0.25 * (0.6 + 0.7) / 2 = 0.08125 -> presence | harm 0.382353; enrichment +0.230179.
    Reverse: a help in a2b needs the b solo failed; its reverse (source b failed, base a) is harmed when a passed
    (P 0.475) and helped when a failed (P 0.525): P(help, reverse harm) = 1/4 * 0.625 * 0.475, P(help, reverse help)
    = 1/4 * 0.525 * 0.525; over P(help) 0.2875: 0.258152 and 0.239674."""
    rates = planted_rates(hand_spec(), ["m"], NOISE, claim_law={(1, 0): 0.75, (1, 1): 0.25})
    assert rates.help_harm() == pytest.approx((0.2875, 0.2125))
    assert rates.help_harm("m", "cutedsl2tirx") == pytest.approx((0.2875, 0.2125))
    assert rates.standing("above", draw="paper") == pytest.approx((0.25, 0.625, 0.0))
    assert rates.standing("same", draw="paper") == pytest.approx((0.5, 0.2625, 0.1875))
    assert rates.standing("below", draw="paper") == pytest.approx((0.25, 0.0, 0.475))
    assert rates.standing("above") == pytest.approx((0.25, 0.3125, 0.1875))
    assert rates.standing("same") == pytest.approx((0.5, 0.2875, 0.2125))
    assert rates.standing("below") == pytest.approx((0.25, 0.2625, 0.2375))
    assert rates.enrichment() == pytest.approx((0.04375 / 0.2875, 0.08125 / 0.2125, 0.08125 / 0.2125
                                                - 0.04375 / 0.2875))
    reverse = rates.reverse()
    assert reverse["harm"] == pytest.approx(0.25 * 0.625 * 0.475 / 0.2875)
    assert reverse["help"] == pytest.approx(0.25 * 0.525 * 0.525 / 0.2875)
    # The claim law by Monte Carlo: one claim per file, a closure with probability 0.25.
    law = claim_counts(hand_spec())
    assert set(law) == {(1, 0), (1, 1)} and law[1, 1] == pytest.approx(0.25, abs=0.01)
    with pytest.raises(KeyError):
        rates.help_harm("not-a-model")
    with pytest.raises(ValueError, match="judge"):
        planted_rates(hand_spec().model_copy(update={"judge": "real"}), ["m"], NOISE)


def test_the_speed_law_by_hand_and_against_the_generator() -> None:
    """The synthetic judge's speed law (synthetic/speed.py). By hand: a pass never reads faster than a pass2x; with
    no attempt spread and no reading noise two kernels of one tier and problem read the same, so neither is faster;
    with the reading noise alone, two readings differ by more than the margin it was set from in 5 % of pairs,
    2.5 % each way (the margin is the noise's pair-p95), less only where a reading is held at its tier's band edge
    (rare with pass2x speeds spread wide). Against the generator: `faster_prob`'s own Monte Carlo agrees with pairs
    of kernels drawn by `judged_speedup` (40,000 pairs per tier pair, two problems' speeds each side sharing
    nothing else; standard error ≤ 0.0025)."""
    spec = SyntheticSpec(attempt_speed_sigma=0.0, judge_noise_margin=0.0)
    assert faster_prob(spec, "pass", "pass2x", 0.0) == 0.0
    assert faster_prob(spec, "pass", "pass", 0.0) == faster_prob(spec, "pass2x", "pass2x", 0.0) == 0.0
    assert faster_prob(spec, "pass2x", "pass", 0.0) == pytest.approx(1.0, abs=1e-4)
    noisy = SyntheticSpec(attempt_speed_sigma=0.0, judge_noise_margin=NOISE, pass2x_speedup_sigma=5.0)
    assert noise_sigma(NOISE) == pytest.approx(math.log1p(NOISE) / (1.959964 * math.sqrt(2)), rel=1e-6)
    assert faster_prob(noisy, "pass2x", "pass2x", NOISE) == pytest.approx(0.025, abs=0.001)
    assert faster_prob(noisy, "pass", "pass", NOISE) == pytest.approx(0.025 * (1 - 0.02), abs=0.0015)
    # Two readings of one kernel: their pair-p95 of |ratio - 1| is the margin.
    rng = random.Random(5)
    ratios = sorted(abs(judged_speedup(rng, noisy, 0, "p", "pass2x") / judged_speedup(rng, noisy, 0, "p", "pass2x")
                        - 1) for _ in range(20_000))
    assert ratios[int(0.95 * len(ratios))] == pytest.approx(NOISE, rel=0.08)
    law = SyntheticSpec(attempt_speed_sigma=0.1, pass_speedup_min=0.5, pass2x_speedup_sigma=0.4)
    for x, y in (("pass", "pass"), ("pass2x", "pass"), ("pass2x", "pass2x")):
        rng = random.Random(f"{x}{y}")
        wins = 0
        for k in range(40_000):
            a, b = judged_speedup(rng, law, 7, f"p{k}", x), judged_speedup(rng, law, 7, f"p{k}", y)
            assert a <= PASS_CEILING if x == "pass" else a >= 2.0
            wins += a > (1 + NOISE) * b
        assert wins / 40_000 == pytest.approx(faster_prob(law, x, y, NOISE), abs=0.0075), (x, y)


def test_the_preset_plants_the_papers_headline_rates() -> None:
    """From the spec alone, at the margin the analysis applies to synthetic attempts: standing above 71.2 % help /
    8.1 % harm and below 10.6 % / 53.8 % within a point; closure enrichment 7-17 points for five models and none for
    the sixth; help about as often as harm overall."""
    config = load_experiment(PRESET)
    assert config.name == PRESET.stem and config.description.startswith("SYNTHETIC")
    assert config.is_synthetic and config.synthetic is not None and config.synthetic.judge == "synthetic"
    rates = planted_rates(config.synthetic, config.models, NOISE)
    for group, help_rate, harm_rate in (("above", 0.712, 0.081), ("below", 0.106, 0.538)):
        _, h, x = rates.standing(group, draw="paper")
        assert abs(h - help_rate) < 0.01 and abs(x - harm_rate) < 0.01, (group, h, x)
    enrichment = sorted(rates.enrichment(m)[2] for m in config.models)
    assert abs(enrichment[0]) < 0.005 and all(0.065 <= e <= 0.175 for e in enrichment[1:]), enrichment
    # T and H are the preset's assumption (≈ 0.32 each), which the refit at the measured margin traded against the
    # paper's standing: 0.319 and 0.333.
    t, h = rates.help_harm()
    assert abs(t - 0.32) < 0.015 and abs(h - 0.32) < 0.015 and abs(t - h) < 0.02
    assert abs(rates.reverse()["harm"] - 0.415) < 0.02     # not a knob: it follows from the rest


# --- the preset, run and recovered ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def preset_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("calibration") / "run"
    done = subprocess.run([sys.executable, "-m", "mkb_ray.cli", "run", str(PRESET), "--run-dir", str(run_dir),
                           "--no-progress"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return run_dir


@pytest.fixture(scope="module")
def recovered(preset_run: Path):
    with RunStore(preset_run, readonly=True) as store:
        replicates = cell_replicates(result_rows(store))
        spec = run_spec(store.meta())
        truth = truth_categories(store, sorted(source_skill_shas(replicates)))
    assert spec is not None
    return replicates, spec, truth, calibration_table(replicates, spec, truth)


@pytest.mark.ray
def test_the_analysis_recovers_every_planted_rate(preset_run: Path, recovered) -> None:
    replicates, spec, truth, table = recovered
    with sqlite3.connect(f"file:{preset_run / 'store.sqlite'}?mode=ro", uri=True) as conn:
        assert conn.execute("SELECT count(*), sum(synthetic) FROM trials").fetchone() == (14208, 14208)
    checked = table.filter(pl.col("checked"))
    assert checked.height == 35 and checked["level"][0] == pytest.approx(1 - 0.05 / 35)
    outside = checked.filter(~pl.col("within_ci"))
    assert outside.is_empty(), outside.select("metric", "group", "planted", "recovered", "ci_low", "ci_high")
    assert table.filter(pl.col("metric") == "paper_standing_harm", pl.col("group") == "below")["paper"][0] == 0.538
    assert table.filter(pl.col("metric") == "standing_harm", pl.col("group") == "below")["paper"][0] is None
    # The closure effect is plain to see: at the usual 95 % the enrichment interval clears 0 for at least four of
    # the five models with a planted effect, and for all of them pooled; not for the model without one.
    per_model = {r["model"]: r for r in enrichment_table(replicates, truth, [CLOSURE], by=("model",))
                 .iter_rows(named=True)}
    planted = table.filter(pl.col("metric") == "closure_enrichment")
    effect = {r["group"]: r["planted"] for r in planted.iter_rows(named=True) if r["group"] != "all"}
    with_effect = [m for m, e in effect.items() if e > 0.05]
    assert len(with_effect) == 5
    assert sum(per_model[m]["enrichment_lo"] > 0 for m in with_effect) >= 4, per_model
    without = next(m for m, e in effect.items() if e <= 0.05)
    assert per_model[without]["enrichment_lo"] < 0 < per_model[without]["enrichment_hi"]
    pooled = enrichment_table(replicates, truth, [CLOSURE], by=()).row(0, named=True)
    assert pooled["enrichment_lo"] > 0.03


@pytest.mark.ray
def test_a_wrongly_planted_rate_falls_outside(recovered) -> None:
    """The check has teeth: the same run against a spec without the closure effect, with the source-pass boost cut
    by 0.2 or with the help shift raised by 0.1 puts planted values outside the recovered intervals."""
    replicates, spec, truth, table = recovered
    data = spec.model_dump()
    no_closure = SyntheticSpec.model_validate({**data, "closure_harm_per_claim": 0.0, "per_model": {
        m: {**e, "closure_harm_per_claim": 0.0} for m, e in data["per_model"].items()}})
    wrong = calibration_table(replicates, no_closure, truth, n_boot=1000)
    missed = wrong.filter(pl.col("metric") == "closure_enrichment", ~pl.col("within_ci"))
    assert "all" in missed["group"].to_list()
    # (The standing rows of both groupings have teeth: the paper's and the independent draw's.)
    for knob, change, expected in (("source_pass_shift", -0.2, {("paper_standing_help", "above"), ("H", "all"),
                                                                ("standing_harm", "same")}),
                                   # (at the refitted preset the help shift shows first as less harm: H moves
                                   # 0.021, T 0.017)
                                   ("skill_help_shift", 0.1, {("H", "all"), ("paper_standing_harm", "below"),
                                                              ("standing_help", "below")})):
        other = SyntheticSpec.model_validate({**data, "per_model": {
            m: {**e, knob: e[knob] + change} for m, e in data["per_model"].items()}})
        missed = calibration_table(replicates, other, truth, n_boot=1000).filter(pl.col("checked"),
                                                                                 ~pl.col("within_ci"))
        assert expected <= set(zip(missed["metric"], missed["group"])), (knob, sorted(zip(missed["metric"],
                                                                                    missed["group"])))


def _browser() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.ray
def test_the_report_shows_planted_vs_recovered(preset_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    summary = render_report(preset_run, out, ReportOptions(trial_pages=False, n_boot=200))
    assert summary.synthetic and "calibration.csv" in summary.tables
    page = (out / "index.html").read_text()
    assert 'id="synthetic-banner"' in page and 'id="calibration"' in page
    assert "Planted vs recovered (SYNTHETIC)" in page and "35 of 35 planted values lie inside" in page
    frame = pl.read_csv(out / "tables" / "calibration.csv")
    assert frame.height == 35 and frame["within_ci"].all()
    md = (out / "tables" / "tables.md").read_text()
    assert "## Planted vs recovered (SYNTHETIC)" in md
    assert "| help rate \\| standing (own base, paper) | above | 0.712 |" in md
    browser = _browser()
    if browser is None:
        pytest.skip("no chromium or chromium-browser on PATH (the headless page-load check needs one)")
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          (out / "index.html").as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "Planted vs recovered (SYNTHETIC)" in dom.stdout and "SYNTHETIC RUN" in dom.stdout
    assert "closure enrichment (generator's labels)" in dom.stdout


def test_only_a_run_with_drawn_verdicts_has_planted_rates() -> None:
    assert run_spec({"config_json": '{"name": "real", "synthetic": null}'}) is None
    assert run_spec({"config_json": '{"synthetic": {"judge": "real"}}'}) is None
    assert run_spec({"config_json": "not json"}) is None
    assert run_spec({"config_json": '{"synthetic": {"seed": 4}}'}) == SyntheticSpec(seed=4)
