"""Prevalence corrected for the annotator's measured error (analysis/annotator_correction.py)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from mkb_ray.analysis.annotator_correction import corrected_prevalence, gold_rates, rogan_gladen
from mkb_ray.claims.annotator_error import AnnotatorError, CategoryError

C = "unsupported_closure"
REPO = Path(__file__).resolve().parents[1]


def test_rogan_gladen_by_hand():
    # q = p·se + (1 − p)·fp with p = 1/9, se 0.5, fp 0.05: q = 0.0556 + 0.0444 = 0.1; inverted back to 1/9.
    assert rogan_gladen(0.1, 0.5, 0.05) == pytest.approx(1 / 9)
    assert rogan_gladen(0.01, 0.5, 0.05) == 0.0            # below the false-positive floor: clipped
    assert rogan_gladen(0.9, 0.5, 0.05) == 1.0
    assert rogan_gladen(0.1, 0.08, 0.05) is None           # the labels barely separate c from the rest


def test_gold_rates_come_from_the_recorded_counts():
    error = AnnotatorError("a", "test", 10, 273, 0.49, 0.43, {C: CategoryError(0.4, 0.2105, 19, 4, 10)})
    rates = gold_rates(error, C)
    assert (rates.true_positives, rates.gold, rates.false_positives, rates.others) == (4, 19, 6, 254)
    assert rates.sensitivity == pytest.approx(4 / 19) and rates.false_positive_rate == pytest.approx(6 / 254)
    assert gold_rates(error, "workload_census") is None


def _world(seed: int, truth: float, se: float, fp: float):
    """Simulated chains and the annotator's error on a simulated 300-claim gold set
    (benchmarks/prevalence_correction_coverage.py, which runs 60 such worlds)."""
    spec = importlib.util.spec_from_file_location("coverage", REPO / "benchmarks" / "prevalence_correction_coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.simulated_world(seed, truth, se, fp)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_corrected_share_covers_the_truth_where_the_raw_one_does_not(seed):
    # True share 0.30; an annotator finding 60 % of C and calling 10 % of the rest C reports ~0.25.
    nodes, error = _world(seed, truth=0.30, se=0.6, fp=0.10)
    row = corrected_prevalence(nodes, error, [C], n_boot=1000, seed=seed).row(0, named=True)
    assert not row["raw_lo"] <= 0.30 <= row["raw_hi"], row
    assert row["corrected_lo"] <= 0.30 <= row["corrected_hi"], row
    # The gold set is a sample too (300 claims): the corrected interval is wider than the raw one for it.
    assert row["corrected_hi"] - row["corrected_lo"] > row["raw_hi"] - row["raw_lo"]


def test_a_category_the_labels_cannot_separate_gets_no_corrected_value():
    nodes, error = _world(4, truth=0.2, se=0.12, fp=0.10)
    error = AnnotatorError("sim", "test", 10, 300, 0.5, 0.4, {C: CategoryError(0.2, 0.1, 50, 5, 25)})  # se 0.1
    row = corrected_prevalence(nodes, error, [C], n_boot=200).row(0, named=True)
    assert row["raw"] is not None and row["corrected"] is None and row["corrected_lo"] is None


def _lineage_world(seed: int):
    spec = importlib.util.spec_from_file_location("lineage_coverage",
                                                  REPO / "benchmarks" / "lineage_correction_coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.simulated_world(seed), module.true_metrics


@pytest.mark.parametrize("seed", [1, 2])
def test_corrected_survival_and_reinforcement_cover_the_truth_where_the_raw_ones_do_not(seed):
    """Closures carried 0.92 per hop, the rest 0.75; an annotator finding 60 % of closures and calling 8 % of the
    rest closures follows a mixed sample of lineages. The corrected values (analysis/lineage_correction.py) cover the
    true closures' survival at 2, 5 and 10 hops and reinforced share; the raw ones do not
    (benchmarks/lineage_correction_coverage.py: 36-38 of 40 worlds vs 0)."""
    from mkb_ray.analysis.lineage_correction import corrected_lineage_metrics

    (labelled, truth, edges, error), true_metrics = _lineage_world(seed)
    true = true_metrics(truth, edges)
    table = corrected_lineage_metrics(labelled, edges, error, C, n_boot=500, seed=seed)
    assert table["metric"].to_list() == ["survival_t2", "survival_t5", "survival_t10", "reinforced"]
    for row in table.iter_rows(named=True):
        value = true[row["metric"]]
        assert not row["raw_lo"] <= value <= row["raw_hi"], (row, value)
        assert row["corrected_lo"] <= value <= row["corrected_hi"], (row, value)
        assert 0.3 < row["purity"] < 0.9


def test_a_label_that_cannot_be_inverted_gives_no_corrected_lineage_metric():
    from mkb_ray.analysis.lineage_correction import corrected_lineage_metrics

    (labelled, _, edges, _), _ = _lineage_world(3)
    error = AnnotatorError("sim", "test", 10, 300, 0.5, 0.4, {C: CategoryError(0.2, 0.1, 50, 5, 25)})  # se 0.1
    table = corrected_lineage_metrics(labelled, edges, error, C, n_boot=100)
    assert table["raw"].null_count() == 0 and table["corrected"].null_count() == table.height
