"""The analysis's one bootstrap: a percentile bootstrap that resamples *clusters* (units), used by every metric's
interval (docs/metrics.md, "Intervals").

Why clusters: the cells of one problem are not independent draws. A problem's two directions share their solo
attempts (the source of one is the base of the other), every model meets the same hard and easy problems, and a
model's replicates of one problem share that model's grip on it. Resampling cells one by one treats all of that as
independent and gives intervals that are too narrow; resampling whole problems keeps it. The benchmark metrics'
unit is therefore the problem id (`pairs.ScoredPair.unit`), with every model, target, direction and replicate of it
inside; a row that holds a single problem (the per-problem lift) resamples its cells instead. Chain hop metrics
(`chains.py`) resample the chains' problems; the lineage metrics (`propagation.py`, `lineage_correction.py`)
resample chains, each chain carrying all its claims and hops.

Models are not resampled: the paper's questions are about these models (one row per model, and a pooled row over
the roster as it is), not about a population of models they were drawn from. Resampling six models would answer
a question nobody asked and widen every pooled interval by the spread between models. The coverage benchmark
(`benchmarks/metric_coverage.py`) checks that problem-level resampling alone covers the truth of synthetic worlds
with per-problem difficulty and model × problem effects.

How: a statistic is written as a function of per-unit sums (help count, pair count, log-ratio sum, …), so a
resample is one matrix product: `counts` (n_boot × units, how often each unit was drawn) @ per-unit sums.

NaN handling, stated once: a resample on which a statistic is undefined (its denominator is empty: no unit of the
resample has a pair in that group) yields NaN and is left out; the interval is the percentile interval of the
others, and None when every resample is undefined or there are no resamples.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, NamedTuple, Optional, Sequence

import numpy as np


class Interval(NamedTuple):
    lo: Optional[float]
    hi: Optional[float]


NO_INTERVAL = Interval(None, None)


@dataclass(frozen=True)
class Bootstrap:
    """How intervals are drawn: `n_boot` resamples (0: none), numpy's default_rng(`seed`), two-sided `level`."""

    n_boot: int = 1000
    seed: int = 0
    level: float = 0.95

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)

    def counts(self, n_units: int, rng: np.random.Generator) -> np.ndarray:
        """(n_boot, n_units): how many times each unit is drawn in each resample (units drawn with replacement)."""
        if self.n_boot <= 0 or n_units == 0:
            return np.zeros((0, n_units))
        picks = rng.integers(0, n_units, size=(self.n_boot, n_units))
        out = np.zeros((self.n_boot, n_units))
        np.add.at(out, (np.arange(self.n_boot)[:, None], picks), 1.0)
        return out

    def resampled_sums(self, per_unit: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Per-unit sums (units × …) → the same sums over each resample (n_boot × …)."""
        per_unit = np.asarray(per_unit, dtype=float)
        w = self.counts(per_unit.shape[0], rng)
        return np.tensordot(w, per_unit, axes=(1, 0))

    def interval(self, replicates: np.ndarray) -> Interval:
        """The percentile interval of a statistic's resampled values (NaN: undefined on that resample, left out)."""
        return percentile_interval(replicates, self.level)

    def of(self, per_unit: np.ndarray, statistic: Callable[[np.ndarray], np.ndarray],
           rng: np.random.Generator) -> Interval:
        """The interval of `statistic`, a function of the summed per-unit columns (vectorised over resamples:
        it gets an array n_boot × columns… and returns n_boot values)."""
        if self.n_boot <= 0 or len(per_unit) == 0:
            return NO_INTERVAL
        sums = self.resampled_sums(per_unit, rng)
        with np.errstate(invalid="ignore", divide="ignore"):
            values = statistic(sums)
        return self.interval(values)


def percentile_interval(values: np.ndarray, level: float) -> Interval:
    """The (1 − level)/2 and (1 + level)/2 percentiles of the defined (non-NaN) values; None when none is."""
    values = np.asarray(values, dtype=float).ravel()
    values = values[~np.isnan(values)]
    if values.size == 0:
        return NO_INTERVAL
    lo, hi = np.percentile(values, [50 * (1 - level), 50 * (1 + level)])
    return Interval(float(lo), float(hi))


def percentile_columns(replicates: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """`percentile_interval` of each column of replicates [n_boot, M]: arrays lo, hi (NaN where a column has no
    defined value)."""
    columns = [percentile_interval(replicates[:, j], level) for j in range(replicates.shape[1])]
    return (np.array([np.nan if c.lo is None else c.lo for c in columns]),
            np.array([np.nan if c.hi is None else c.hi for c in columns]))


def ratio(numerator: int, denominator: int) -> Callable[[np.ndarray], np.ndarray]:
    """A statistic for `Bootstrap.of`: column `numerator` / column `denominator` of the resampled sums."""
    return lambda sums: sums[:, numerator] / sums[:, denominator]


def per_unit_sums(units: Sequence[Hashable], values: np.ndarray) -> np.ndarray:
    """Rows of `values` (one per item) summed by the item's unit, in first-seen unit order."""
    values = np.asarray(values, dtype=float)
    index: dict[Hashable, int] = {}
    rows = [index.setdefault(u, len(index)) for u in units]
    out = np.zeros((len(index),) + values.shape[1:])
    np.add.at(out, np.array(rows, dtype=int), values)
    return out


