"""Paired single-hop metrics: did the skill help? Help rate T, harm rate H, neutral, and the ΔGM paired lift, per
group of cell-replicates, with bootstrap confidence intervals over cells.

Definitions (docs/metrics.md, "Paired outcomes"):
- A resolved cell-replicate is **help** when the skill attempt passes and the base fails, or both pass and the
  base's final kernel time over the skill's exceeds 1 + the margin (the judge's measured timing noise for the
  target and the two kernels' time classes, analysis/noise_margins.py; or a fixed `noise`); **harm** mirrors it;
  anything else is
  **neutral** — a skipped skill attempt (nothing was transferred) included. T = help share, H = harm share.
- **ΔGM** = exp(mean over cells of the cell's mean log(base e2e / skill e2e)) − 1, unclipped, where an attempt's
  end-to-end time is its final kernel time when it passed, else `fail_factor` × the problem's eager time (one per
  target and problem for the run, both arms alike, so a fail against a fail is exactly 0; it falls back to PyTorch;
  `fail_factor` 1 by default); a skipped skill attempt takes the base's time (ratio 1).
- Confidence intervals: percentile bootstrap that resamples cells (with all their replicates), `n_boot` replicates
  from numpy's default_rng(seed).
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal, Optional, Sequence

import numpy as np
import polars as pl

from ..synthetic.planted import SYNTHETIC_MARGIN
from .cells import Attempt, CellReplicate, group_key
from .noise_margins import NoiseMargins, load_noise_margins

Outcome = Literal["help", "harm", "neutral"]
OUTCOMES: tuple[Outcome, ...] = ("help", "harm", "neutral")


@dataclass(frozen=True)
class PairingRules:
    """The config values of the paired comparison (recorded with every table). `noise` None: the measured margin of
    each comparison (`margin`)."""

    noise: Optional[float] = None      # a fixed 'faster' margin: base_ms / skill_ms > 1 + noise
    fail_factor: float = 1.0           # a failed attempt's end-to-end time, as a multiple of the eager time
    # The judge's measured timing noise per target and kernel-time class (analysis/noise_margins.json).
    margins: NoiseMargins = field(default_factory=load_noise_margins, repr=False, compare=False)

    def margin(self, target: str, synthetic: bool, *kernel_ms: Optional[float]) -> float:
        """How much faster one of two passing kernels judged at `kernel_ms` on `target` must be to count as faster:
        the fixed `noise` when one is set; for attempts of the synthetic judge, the margin its time law was
        calibrated with (SYNTHETIC_MARGIN: its times are drawn, not measured); else the measured margin of the
        noisier of the kernels' time classes."""
        if self.noise is not None:
            return self.noise
        if synthetic:
            return SYNTHETIC_MARGIN
        return self.margins.margin(target, *kernel_ms)

    def margin_of(self, cr: CellReplicate) -> float:
        """`margin` for a cell-replicate's base and skill attempts."""
        pair = [a for a in (cr.base, cr.skill) if a is not None]
        return self.margin(cr.target, any(a.synthetic for a in pair), *(a.kernel_ms for a in pair))


def compare(skill_passed: bool, base_passed: bool, skill_ms: Optional[float], base_ms: Optional[float],
            noise: float) -> Outcome:
    """The one definition of help and harm, for benchmark cells and chain hops alike: a pass against a fail, or
    two passes whose final kernel times differ by a ratio above 1 + noise."""
    if skill_passed != base_passed:
        return "help" if skill_passed else "harm"
    if skill_passed and skill_ms and base_ms:
        if base_ms / skill_ms > 1 + noise:
            return "help"
        if skill_ms / base_ms > 1 + noise:
            return "harm"
    return "neutral"


def outcome(cr: CellReplicate, rules: PairingRules = PairingRules()) -> Outcome:
    """Help, harm or neutral for one resolved cell-replicate (see the module docstring)."""
    base, skill = cr.base, cr.skill
    if base is None or skill is None or skill.skipped:
        return "neutral"
    return compare(skill.passed, base.passed, skill.kernel_ms, base.kernel_ms, rules.margin_of(cr))


def end_to_end_ms(attempt: Attempt, eager_ms: Optional[float], rules: PairingRules) -> Optional[float]:
    """The attempt's final kernel time when it passed, else the problem's eager time × fail_factor (None when the
    run never measured one). `eager_ms` is one time per (target, problem) of the run (`problem_eager_ms`, which
    every attempt's own measurement feeds), the same for both arms: each attempt's own eager measurement differs by
    the judge's noise (and the cached baseline is re-measured now and then), which made a fail against a fail read
    as a speed change."""
    if attempt.passed and attempt.kernel_ms:
        return attempt.kernel_ms
    return eager_ms * rules.fail_factor if eager_ms else None


def log_ratio(cr: CellReplicate, eager_ms: Optional[float], rules: PairingRules) -> Optional[float]:
    """log(base e2e / skill e2e) of one resolved cell-replicate; None when a time is unknown (no eager time was
    ever measured for the problem)."""
    base, skill = cr.base, cr.skill
    if base is None or skill is None:
        return None
    if skill.skipped:
        return 0.0
    b, s = end_to_end_ms(base, eager_ms, rules), end_to_end_ms(skill, eager_ms, rules)
    return math.log(b / s) if b and s else None


def problem_eager_ms(replicates: Sequence[CellReplicate]) -> dict[tuple[str, str], float]:
    """The median eager time per (target, problem) over every attempt that measured one: the end-to-end time of a
    failed attempt (`end_to_end_ms`), one value for both arms."""
    seen: dict[tuple[str, str], list[float]] = defaultdict(list)
    for cr in replicates:
        for a in (cr.source, cr.base, cr.skill):
            if a is not None and a.eager_ms:
                seen[cr.target, cr.problem_id].append(a.eager_ms)
    return {k: float(np.median(v)) for k, v in seen.items()}


@dataclass(frozen=True, slots=True)
class _CellStats:
    """Per cell: counts of outcomes over its resolved replicates, and the mean log ratio (None: none known)."""

    key: tuple[str, ...]
    help: int
    harm: int
    neutral: int
    log_ratio: Optional[float]


def _cell_stats(replicates: Sequence[CellReplicate], by: Sequence[str], rules: PairingRules
                ) -> dict[tuple[str, ...], list[_CellStats]]:
    eager = problem_eager_ms(replicates)
    cells: dict[tuple, list[CellReplicate]] = defaultdict(list)
    for cr in replicates:
        if cr.resolved:
            cells[cr.cell_key].append(cr)
    groups: dict[tuple[str, ...], list[_CellStats]] = defaultdict(list)
    for members in cells.values():
        counts = {o: 0 for o in OUTCOMES}
        logs = []
        for cr in members:
            counts[outcome(cr, rules)] += 1
            lr = log_ratio(cr, eager.get((cr.target, cr.problem_id)), rules)
            if lr is not None:
                logs.append(lr)
        key = group_key(members[0], by)
        groups[key].append(_CellStats(key, counts["help"], counts["harm"], counts["neutral"],
                                      float(np.mean(logs)) if logs else None))
    return groups


def _interval(values: np.ndarray, level: float) -> tuple[Optional[float], Optional[float]]:
    if values.size == 0 or np.all(np.isnan(values)):
        return None, None
    lo, hi = np.nanpercentile(values, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def paired_table(replicates: Sequence[CellReplicate], by: Sequence[str] = ("model", "direction"),
                 rules: PairingRules = PairingRules(), n_boot: int = 1000, seed: int = 0,
                 level: float = 0.95) -> pl.DataFrame:
    """One row per group: n_cells, n_pairs (resolved cell-replicates), n_help / n_harm / n_neutral, T, H,
    neutral share and ΔGM (`dgm`, over the n_dgm cells whose times are known), each rate with `_lo` / `_hi`
    bootstrap bounds (None without resamples). `by` ⊆ {model, target, direction, family}; () is overall."""
    by = list(by)
    rng = np.random.default_rng(seed)
    rows = []
    for key, cells in sorted(_cell_stats(replicates, by, rules).items()):
        h = np.array([c.help for c in cells], dtype=float)
        m = np.array([c.harm for c in cells], dtype=float)
        n = h + m + np.array([c.neutral for c in cells], dtype=float)
        logs = np.array([c.log_ratio for c in cells if c.log_ratio is not None], dtype=float)
        row = {**dict(zip(by, key)), "n_cells": len(cells), "n_pairs": int(n.sum()), "n_help": int(h.sum()),
               "n_harm": int(m.sum()), "n_neutral": int((n - h - m).sum()),
               "T": h.sum() / n.sum(), "H": m.sum() / n.sum(), "neutral": 1 - (h.sum() + m.sum()) / n.sum(),
               "n_dgm": int(logs.size), "dgm": math.expm1(logs.mean()) if logs.size else None}
        if n_boot > 0:
            pick = rng.integers(0, len(cells), size=(n_boot, len(cells)))
            with np.errstate(invalid="ignore", divide="ignore"):
                t_reps, h_reps = h[pick].sum(1) / n[pick].sum(1), m[pick].sum(1) / n[pick].sum(1)
            row["T_lo"], row["T_hi"] = _interval(t_reps, level)
            row["H_lo"], row["H_hi"] = _interval(h_reps, level)
            if logs.size:
                lp = rng.integers(0, logs.size, size=(n_boot, logs.size))
                row["dgm_lo"], row["dgm_hi"] = _interval(np.expm1(logs[lp].mean(1)), level)
        rows.append(row)
    schema_extra = {c: pl.Float64 for c in ("T_lo", "T_hi", "H_lo", "H_hi", "dgm_lo", "dgm_hi", "dgm")}
    if not rows:
        return pl.DataFrame(schema={**{k: pl.Utf8 for k in by}, "n_cells": pl.Int64, "n_pairs": pl.Int64,
                                    "T": pl.Float64, "H": pl.Float64, **schema_extra})
    frame = pl.DataFrame(rows, infer_schema_length=None)
    for column in schema_extra:
        if column not in frame.columns:
            frame = frame.with_columns(pl.lit(None, dtype=pl.Float64).alias(column))
    return frame
