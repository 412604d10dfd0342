"""Paired single-hop metrics: did the skill help? Help rate T, harm rate H, neutral, and the ΔGM paired lift, per
group of cell-replicates, with bootstrap confidence intervals over problems.

Aggregations of the scored pairs (`pairs.score_pairs`; the definitions are in `outcomes.py`, docs/metrics.md,
"Paired outcomes"):
- T = help share, H = harm share of the group's resolved cell-replicates; neutral the rest.
- **ΔGM** = exp(mean over cells of the cell's mean log(base e2e / skill e2e)) − 1 (`outcomes.end_to_end_ms`: a
  pass at the faster of its kernel and eager, a fail at `fail_factor` × the problem's eager time).
- Intervals: `bootstrap.Bootstrap`, resampling problems (with every cell and replicate of each).
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Optional, Sequence, Union

import numpy as np
import polars as pl

from .bootstrap import Bootstrap, per_unit_sums
from .cells import CellReplicate, group_key
from .outcomes import (OUTCOMES, Outcome, PairingRules, compare, end_to_end_ms, log_ratio, outcome,
                       problem_eager_ms)
from .pairs import PairTable, ScoredPair, as_pairs

__all__ = ["OUTCOMES", "Outcome", "PairingRules", "compare", "end_to_end_ms", "log_ratio", "outcome",
           "paired_table", "problem_eager_ms"]


def _by_cell(table: PairTable, by: Sequence[str]) -> dict[tuple[str, ...], dict[tuple, list[ScoredPair]]]:
    """group key -> cell key -> the cell's scored replicates."""
    groups: dict[tuple[str, ...], dict[tuple, list[ScoredPair]]] = defaultdict(dict)
    for p in table:
        groups[group_key(p.cr, by)].setdefault(p.cr.cell_key, []).append(p)
    return groups


# Columns of the per-problem sums the bootstrap resamples.
_HELP, _HARM, _N, _LOG, _N_LOG = range(5)


def paired_table(replicates: Union[PairTable, Sequence[CellReplicate]], by: Sequence[str] = ("model", "direction"),
                 rules: Optional[PairingRules] = None, n_boot: int = 1000, seed: int = 0,
                 level: float = 0.95) -> pl.DataFrame:
    """One row per group: n_cells, n_pairs (resolved cell-replicates), n_help / n_harm / n_neutral, T, H,
    neutral share and ΔGM (`dgm`, over the n_dgm cells whose times are known), each rate with `_lo` / `_hi`
    bootstrap bounds (resampling problems, analysis/bootstrap.py; None without resamples). `by` ⊆ {model,
    target, direction, family}; () is overall. `replicates`: a `PairTable` or cell-replicates to score."""
    table = as_pairs(replicates, rules)
    by = list(by)
    boot = Bootstrap(n_boot, seed, level)
    rng = boot.rng()
    rows = []
    for key, cells in sorted(_by_cell(table, by).items()):
        # Per cell: outcome counts, and the mean log ratio over its replicates whose times are known (a cell
        # weighs one in ΔGM however many replicates it has).
        units, stats = [], []
        for members in cells.values():
            logs = [p.log_ratio for p in members if p.log_ratio is not None]
            stats.append([sum(p.outcome == "help" for p in members), sum(p.outcome == "harm" for p in members),
                          len(members), float(np.mean(logs)) if logs else 0.0, 1.0 if logs else 0.0])
            units.append(members[0].unit)
        per_cell = np.array(stats, dtype=float)
        total = per_cell.sum(0)
        n = total[_N]
        row = {**dict(zip(by, key)), "n_cells": len(cells), "n_pairs": int(n), "n_help": int(total[_HELP]),
               "n_harm": int(total[_HARM]), "n_neutral": int(n - total[_HELP] - total[_HARM]),
               "T": total[_HELP] / n, "H": total[_HARM] / n, "neutral": 1 - (total[_HELP] + total[_HARM]) / n,
               "n_dgm": int(total[_N_LOG]),
               "dgm": math.expm1(total[_LOG] / total[_N_LOG]) if total[_N_LOG] else None}
        if n_boot > 0:
            # A row of one problem resamples its cells instead (one unit would give a zero-width interval).
            if len(set(units)) == 1:
                units = list(range(len(units)))
            per_unit = per_unit_sums(units, per_cell)
            sums = boot.resampled_sums(per_unit, rng)
            with np.errstate(invalid="ignore", divide="ignore"):
                row["T_lo"], row["T_hi"] = boot.interval(sums[:, _HELP] / sums[:, _N])
                row["H_lo"], row["H_hi"] = boot.interval(sums[:, _HARM] / sums[:, _N])
                if total[_N_LOG]:
                    row["dgm_lo"], row["dgm_hi"] = boot.interval(np.expm1(sums[:, _LOG] / sums[:, _N_LOG]))
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
