"""Relative standing: how the source attempt's tier compares with the base's (above / same / below, on the order
fail < pass < pass2x) and the help and harm rates in each group. The paper (arXiv 2610.05014) reports, pooled over
models: source above base 71.2 % help / 8.1 % harm; below 10.6 % help / 53.8 % harm."""
from __future__ import annotations

from collections import defaultdict
from typing import Literal, Optional, Sequence

import numpy as np
import polars as pl

from .cells import CellReplicate, group_key
from .paired import PairingRules, outcome

Standing = Literal["above", "same", "below"]
STANDINGS: tuple[Standing, ...] = ("above", "same", "below")
_N, _HELP, _HARM = 0, 1, 2


def standing(cr: CellReplicate) -> Standing:
    """The source's tier relative to the base's (both must have run)."""
    assert cr.source is not None and cr.base is not None
    s, b = cr.source.rank, cr.base.rank
    return "above" if s > b else ("below" if s < b else "same")


def problem_key(cr: CellReplicate) -> tuple[str, str, str]:
    """The unit the intervals resample: (model, target, problem). A problem's cells in the two directions share
    their solo attempts (the source of one is the base of the other), so they are resampled together."""
    return (cr.model, cr.target, cr.problem_id)


def standing_table(replicates: Sequence[CellReplicate], by: Sequence[str] = ("model",),
                   rules: PairingRules = PairingRules(), n_boot: int = 0, seed: int = 0,
                   level: float = 0.95) -> pl.DataFrame:
    """One row per group and standing: n (resolved cell-replicates), n_help, n_harm, help_rate, harm_rate (None
    when n is 0). Every standing appears in every group, with n 0 when none fell in it. With n_boot > 0 also
    help_rate_lo / _hi and harm_rate_lo / _hi: percentile bootstrap resampling problems (`problem_key`) within the
    group, n_boot resamples from numpy's default_rng(seed) (None when a resample can leave the standing empty
    every time)."""
    by = list(by)
    # group -> problem -> [standing][n, help, harm]
    per_problem: dict[tuple, dict[tuple, np.ndarray]] = defaultdict(dict)
    for cr in replicates:
        if not cr.resolved:
            continue
        counts = per_problem[group_key(cr, by)].setdefault(problem_key(cr), np.zeros((3, 3)))
        row = counts[STANDINGS.index(standing(cr))]
        row[_N] += 1
        result = outcome(cr, rules)
        if result != "neutral":
            row[_HELP if result == "help" else _HARM] += 1
    rng = np.random.default_rng(seed)
    rows = []
    for key in sorted(per_problem):
        arrays = np.stack(list(per_problem[key].values()))          # (problems, standings, 3)
        totals = arrays.sum(0)
        bounds = _bounds(arrays, n_boot, rng, level) if n_boot > 0 else None
        for i, s in enumerate(STANDINGS):
            n, h, m = (int(v) for v in totals[i])
            row = {**dict(zip(by, key)), "standing": s, "n": n, "n_help": h, "n_harm": m,
                   "help_rate": h / n if n else None, "harm_rate": m / n if n else None}
            if bounds is not None:
                row.update({name: values[i] for name, values in bounds.items()})
            rows.append(row)
    schema = {**{k: pl.Utf8 for k in by}, "standing": pl.Utf8, "n": pl.Int64, "n_help": pl.Int64,
              "n_harm": pl.Int64, "help_rate": pl.Float64, "harm_rate": pl.Float64}
    if n_boot > 0:
        schema.update({c: pl.Float64 for c in ("help_rate_lo", "help_rate_hi", "harm_rate_lo", "harm_rate_hi")})
    return pl.DataFrame(rows, schema=schema)


def _bounds(arrays: np.ndarray, n_boot: int, rng: np.random.Generator, level: float
            ) -> dict[str, list[Optional[float]]]:
    pick = rng.integers(0, arrays.shape[0], size=(n_boot, arrays.shape[0]))
    sums = arrays[pick].sum(1)                                       # (n_boot, standings, 3)
    out: dict[str, list[Optional[float]]] = {}
    for name, column in (("help_rate", _HELP), ("harm_rate", _HARM)):
        with np.errstate(invalid="ignore", divide="ignore"):
            rates = sums[:, :, column] / sums[:, :, _N]
        for side, q in (("lo", 50 * (1 - level)), ("hi", 50 * (1 + level))):
            out[f"{name}_{side}"] = [None if np.all(np.isnan(rates[:, i])) else float(np.nanpercentile(rates[:, i], q))
                                     for i in range(len(STANDINGS))]
    return out
