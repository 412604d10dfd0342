"""Relative standing: how the source attempt's tier compares with a base's (above / same / below, on the order
fail < pass < pass2x) and the help and harm rates in each group.

Two definitions (`pairs.py` says why): `draw="independent"` (the default) compares the source with an independent
draw of the base — the next replicate's base attempt — so the grouping does not depend on the draw the skill
attempt is compared with; `draw="paper"` compares it with the pair's own base, as the paper (arXiv 2610.05014)
does: pooled over models, source above base 71.2 % help / 8.1 % harm, below 10.6 % help / 53.8 % harm. The paper's
grouping shows that pattern even for a skill that does nothing (a failed base cannot be harmed, a passing one
cannot be beaten by a fail), so its numbers are kept for comparison, not read as a skill effect.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Literal, Optional, Sequence, Union

import numpy as np
import polars as pl

from .bootstrap import Bootstrap
from .cells import CellReplicate, group_key
from .outcomes import STANDINGS, Standing, standing_between
from .pairs import PairTable, ScoredPair, as_pairs
from .paired import PairingRules

__all__ = ["STANDINGS", "Standing", "StandingDraw", "standing", "standing_gaps", "standing_of", "standing_table"]

StandingDraw = Literal["independent", "paper"]
_N, _HELP, _HARM = 0, 1, 2


def standing(cr: CellReplicate) -> Standing:
    """The source's tier against the pair's own base (the paper's grouping; both must have run)."""
    assert cr.source is not None and cr.base is not None
    return standing_between(cr.source, cr.base)


def standing_of(pair: ScoredPair, draw: StandingDraw = "independent") -> Optional[Standing]:
    """The pair's standing under `draw` (None: independent, and the cell has no other replicate)."""
    return pair.standing if draw == "independent" else pair.paper_standing


def _counts_by_problem(table: PairTable, by: list[str], draw: StandingDraw
                       ) -> tuple[dict[tuple, dict[str, np.ndarray]], dict[tuple, int]]:
    """Per group, per problem (the bootstrap's unit): counts [standing][n, n_help, n_harm] of the pairs with a
    standing under `draw`; and per group the pairs without one (n_unplaced). A problem whose pairs all lack a
    standing stays in its group with zero counts: it is still one of the group's problems when they are resampled."""
    per_problem: dict[tuple, dict[str, np.ndarray]] = defaultdict(dict)
    unplaced: dict[tuple, int] = defaultdict(int)
    for p in table:
        key = group_key(p.cr, by)
        counts = per_problem[key].setdefault(p.unit, np.zeros((len(STANDINGS), 3)))
        place = standing_of(p, draw)
        if place is None:
            unplaced[key] += 1
            continue
        counts[STANDINGS.index(place)] += (1, p.outcome == "help", p.outcome == "harm")
    return per_problem, unplaced


def standing_table(replicates: Union[PairTable, Sequence[CellReplicate]], by: Sequence[str] = ("model",),
                   rules: Optional[PairingRules] = None, n_boot: int = 0, seed: int = 0, level: float = 0.95,
                   draw: StandingDraw = "independent") -> pl.DataFrame:
    """One row per group and standing: n (resolved cell-replicates with a standing under `draw`), n_help, n_harm,
    help_rate, harm_rate (None when n is 0), and n_unplaced (the group's pairs without a standing draw: a cell
    with one replicate). Every standing appears in every group, with n 0 when none fell in it. With n_boot > 0
    also help_rate_lo / _hi and harm_rate_lo / _hi (`bootstrap.Bootstrap`, resampling problems within the group)."""
    by = list(by)
    per_problem, unplaced = _counts_by_problem(as_pairs(replicates, rules), by, draw)
    boot = Bootstrap(n_boot, seed, level)
    rng = boot.rng()
    rows = []
    for key in sorted(per_problem):
        arrays = np.stack(list(per_problem[key].values()))          # (problems, standings, 3)
        totals = arrays.sum(0)
        sums = boot.resampled_sums(arrays, rng) if n_boot > 0 else None
        for i, s in enumerate(STANDINGS):
            n, h, m = (int(v) for v in totals[i])
            row = {**dict(zip(by, key)), "standing": s, "n": n, "n_help": h, "n_harm": m,
                   "help_rate": h / n if n else None, "harm_rate": m / n if n else None,
                   "n_unplaced": unplaced[key]}
            if sums is not None:
                with np.errstate(invalid="ignore", divide="ignore"):
                    row["help_rate_lo"], row["help_rate_hi"] = boot.interval(sums[:, i, _HELP] / sums[:, i, _N])
                    row["harm_rate_lo"], row["harm_rate_hi"] = boot.interval(sums[:, i, _HARM] / sums[:, i, _N])
            rows.append(row)
    schema = {**{k: pl.Utf8 for k in by}, "standing": pl.Utf8, "n": pl.Int64, "n_help": pl.Int64,
              "n_harm": pl.Int64, "help_rate": pl.Float64, "harm_rate": pl.Float64, "n_unplaced": pl.Int64}
    if n_boot > 0:
        schema.update({c: pl.Float64 for c in ("help_rate_lo", "help_rate_hi", "harm_rate_lo", "harm_rate_hi")})
    return pl.DataFrame(rows, schema=schema)


def standing_gaps(replicates: Union[PairTable, Sequence[CellReplicate]], by: Sequence[str] = (),
                  rules: Optional[PairingRules] = None, n_boot: int = 1000, seed: int = 0, level: float = 0.95,
                  draw: StandingDraw = "independent") -> pl.DataFrame:
    """The pattern the paper reads from standing, as two numbers per group: help_gap = help rate above − help rate
    below, harm_gap = harm rate below − harm rate above (both positive: "above helps, below harms"), with bootstrap
    intervals resampling problems (None where a group lacks either standing). A skill that does nothing gives
    gaps whose intervals cover 0 under the independent draw; the paper's grouping does not (pairs.py)."""
    by = list(by)
    above, below = STANDINGS.index("above"), STANDINGS.index("below")
    per_problem, _ = _counts_by_problem(as_pairs(replicates, rules), by, draw)
    boot = Bootstrap(n_boot, seed, level)
    rng = boot.rng()

    def gaps(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """sums [..., standings, 3] -> (help gap, harm gap)."""
        rate = sums[..., _HELP:] / sums[..., _N:_N + 1]
        return rate[..., above, 0] - rate[..., below, 0], rate[..., below, 1] - rate[..., above, 1]

    rows = []
    for key in sorted(per_problem):
        arrays = np.stack(list(per_problem[key].values()))
        totals = arrays.sum(0)
        row = {**dict(zip(by, key)), "n_above": int(totals[above, _N]), "n_below": int(totals[below, _N]),
               "help_gap": None, "harm_gap": None, "help_gap_lo": None, "help_gap_hi": None, "harm_gap_lo": None,
               "harm_gap_hi": None}
        if totals[above, _N] and totals[below, _N]:
            help_gap, harm_gap = gaps(totals[None])
            row["help_gap"], row["harm_gap"] = float(help_gap[0]), float(harm_gap[0])
            if n_boot > 0:
                with np.errstate(invalid="ignore", divide="ignore"):
                    help_reps, harm_reps = gaps(boot.resampled_sums(arrays, rng))
                row["help_gap_lo"], row["help_gap_hi"] = boot.interval(help_reps)
                row["harm_gap_lo"], row["harm_gap_hi"] = boot.interval(harm_reps)
        rows.append(row)
    schema = {**{k: pl.Utf8 for k in by}, "n_above": pl.Int64, "n_below": pl.Int64,
              **{c: pl.Float64 for c in ("help_gap", "harm_gap", "help_gap_lo", "help_gap_hi", "harm_gap_lo",
                                         "harm_gap_hi")}}
    return pl.DataFrame(rows, schema=schema)
