"""Reverse-direction coupling: of the cells a skill helped in one direction (a2b), what happened in the other (b2a)
for the same model, problem and replicate? The paper (arXiv 2610.05014): 41.5 % of 277 helped comparisons are
harmed in reverse."""
from __future__ import annotations

from collections import defaultdict
from typing import Optional, Sequence, Union

import numpy as np
import polars as pl

from .cells import CellReplicate, group_key
from .bootstrap import Bootstrap
from .outcomes import OUTCOMES, PairingRules
from .pairs import PairTable, as_pairs

BOTH = "both"


def reverse_direction(name: str) -> str:
    source, target = name.split("2")
    return f"{target}2{source}"


def reverse_table(replicates: Union[PairTable, Sequence[CellReplicate]], by: Sequence[str] = ("model",),
                  given: str = "help", rules: Optional[PairingRules] = None, pool_directions: bool = False,
                  n_boot: int = 0, seed: int = 0, level: float = 0.95) -> pl.DataFrame:
    """Per group and direction d: n_given, the resolved cell-replicates in d with outcome `given` whose reverse is
    resolved too, and how those reverses came out: n_<outcome> and share_<outcome> for help, harm, neutral.
    `by` may not contain direction (it is always a column; `pool_directions` puts both in one row, direction
    'both'). With n_boot > 0 also share_<outcome>_lo / _hi (`bootstrap.Bootstrap`, resampling problems within
    the row)."""
    if "direction" in by:
        raise ValueError("reverse_table always splits by direction; leave it out of `by`")
    table = as_pairs(replicates, rules)
    by = list(by)
    index = {(p.cr.model, p.cr.target, p.cr.problem_id, p.cr.replicate, p.cr.direction): p for p in table}
    # row key -> problem -> counts of the reverses' outcomes
    counts: dict[tuple, dict[str, np.ndarray]] = defaultdict(dict)
    for (model, target, problem, rep, direction), p in sorted(index.items()):
        if p.outcome != given:
            continue
        other = index.get((model, target, problem, rep, reverse_direction(direction)))
        if other is None:
            continue
        key = group_key(p.cr, by) + (BOTH if pool_directions else direction,)
        c = counts[key].setdefault(p.unit, np.zeros(len(OUTCOMES)))
        c[OUTCOMES.index(other.outcome)] += 1
    boot = Bootstrap(n_boot, seed, level)
    rng = boot.rng()
    rows = []
    for key, per_problem in sorted(counts.items()):
        arrays = np.stack(list(per_problem.values()))
        c = arrays.sum(0)
        n = int(c.sum())
        row = {**dict(zip(by, key[:-1])), "direction": key[-1], "given": given, "n_given": n,
               **{f"n_{o}": int(c[i]) for i, o in enumerate(OUTCOMES)},
               **{f"share_{o}": c[i] / n for i, o in enumerate(OUTCOMES)}}
        if n_boot > 0:
            sums = boot.resampled_sums(arrays, rng)
            with np.errstate(invalid="ignore", divide="ignore"):
                shares = sums / sums.sum(1, keepdims=True)
            for i, o in enumerate(OUTCOMES):
                row[f"share_{o}_lo"], row[f"share_{o}_hi"] = boot.interval(shares[:, i])
        rows.append(row)
    schema = {**{k: pl.Utf8 for k in by}, "direction": pl.Utf8, "given": pl.Utf8, "n_given": pl.Int64,
              **{f"n_{o}": pl.Int64 for o in OUTCOMES}, **{f"share_{o}": pl.Float64 for o in OUTCOMES}}
    if n_boot > 0:
        schema.update({f"share_{o}_{side}": pl.Float64 for o in OUTCOMES for side in ("lo", "hi")})
    return pl.DataFrame(rows, schema=schema)
