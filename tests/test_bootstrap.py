"""The analysis's one bootstrap (analysis/bootstrap.py): problems are resampled as units, undefined resamples are
left out, and the metrics' intervals follow."""
from __future__ import annotations

import numpy as np
import pytest

from mkb_ray.analysis.bootstrap import Bootstrap, per_unit_sums, percentile_interval
from mkb_ray.analysis.paired import paired_table

from test_paired import a, cr


def test_counts_draw_every_unit_with_replacement() -> None:
    boot = Bootstrap(n_boot=500, seed=3)
    counts = boot.counts(7, boot.rng())
    assert counts.shape == (500, 7) and (counts.sum(1) == 7).all()
    # Each unit is drawn 7 × 1/7 = 1 time per resample on average.
    assert counts.mean() == pytest.approx(1.0) and 0.8 < counts[:, 0].mean() < 1.2
    assert Bootstrap(n_boot=0).counts(7, boot.rng()).shape == (0, 7)


def test_per_unit_sums_add_the_rows_of_one_unit() -> None:
    sums = per_unit_sums(["p2", "p1", "p2"], np.array([[1.0, 2.0], [10.0, 20.0], [100.0, 200.0]]))
    assert sums.tolist() == [[101.0, 202.0], [10.0, 20.0]]       # first-seen order: p2, p1


def test_undefined_resamples_are_left_out_and_none_when_all_are() -> None:
    values = np.array([np.nan, 1.0, 2.0, 3.0, np.nan])
    assert percentile_interval(values, 1.0) == (1.0, 3.0)
    assert percentile_interval(np.array([np.nan, np.nan]), 0.95) == (None, None)
    assert percentile_interval(np.array([]), 0.95) == (None, None)


def test_a_problem_is_resampled_whole_so_correlated_cells_widen_the_interval() -> None:
    """Problem A: 20 cells (models) all helped; problem B: 20 cells all harmed. T = 0.5. Resampling problems, a
    resample holds A twice (T 1, probability 1/4), B twice (T 0, 1/4) or both (T 0.5): the 95 % interval is [0, 1].
    Resampling the 40 cells one by one would have called T 0.5 ± 0.15 — as if the 40 cells were independent,
    though each problem's cells move together."""
    helped = [cr(a("pass", 0.5), a("fail"), a("pass", 0.5), "mlp_norm/A", model=f"m{i}") for i in range(20)]
    harmed = [cr(a("pass", 0.5), a("pass", 0.5), a("fail"), "attention/B", model=f"m{i}") for i in range(20)]
    row = paired_table(helped + harmed, by=(), n_boot=1000, seed=0).row(0, named=True)
    assert row["T"] == 0.5 and (row["T_lo"], row["T_hi"]) == (0.0, 1.0)
    # Per model the same holds: each model has one cell per problem.
    one = paired_table([helped[0], harmed[0]], by=(), n_boot=1000).row(0, named=True)
    assert (one["T_lo"], one["T_hi"]) == (0.0, 1.0)
