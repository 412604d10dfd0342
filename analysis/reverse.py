"""Reverse-direction coupling: of the cells a skill helped in one direction (a2b), what happened in the other (b2a)
for the same model, problem and replicate? The paper (arXiv 2610.05014): 41.5 % of 277 helped comparisons are
harmed in reverse."""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import polars as pl

from .cells import CellReplicate, group_key
from .paired import OUTCOMES, PairingRules, outcome


def reverse_direction(name: str) -> str:
    source, target = name.split("2")
    return f"{target}2{source}"


def reverse_table(replicates: Sequence[CellReplicate], by: Sequence[str] = ("model",), given: str = "help",
                  rules: PairingRules = PairingRules()) -> pl.DataFrame:
    """Per group and direction d: n_given, the resolved cell-replicates in d with outcome `given` whose reverse is
    resolved too, and how those reverses came out: n_<outcome> and share_<outcome> for help, harm, neutral.
    `by` may not contain direction (it is always a column)."""
    if "direction" in by:
        raise ValueError("reverse_table always splits by direction; leave it out of `by`")
    by = list(by)
    index = {(cr.model, cr.target, cr.problem_id, cr.replicate, cr.direction): cr for cr in replicates if cr.resolved}
    counts: dict[tuple, dict[str, int]] = defaultdict(lambda: {o: 0 for o in OUTCOMES})
    for (model, target, problem, rep, direction), cr in sorted(index.items()):
        if outcome(cr, rules) != given:
            continue
        other = index.get((model, target, problem, rep, reverse_direction(direction)))
        if other is None:
            continue
        counts[group_key(cr, by) + (direction,)][outcome(other, rules)] += 1
    rows = []
    for key, c in sorted(counts.items()):
        n = sum(c.values())
        rows.append({**dict(zip(by, key[:-1])), "direction": key[-1], "given": given, "n_given": n,
                     **{f"n_{o}": c[o] for o in OUTCOMES}, **{f"share_{o}": c[o] / n for o in OUTCOMES}})
    schema = {**{k: pl.Utf8 for k in by}, "direction": pl.Utf8, "given": pl.Utf8, "n_given": pl.Int64,
              **{f"n_{o}": pl.Int64 for o in OUTCOMES}, **{f"share_{o}": pl.Float64 for o in OUTCOMES}}
    return pl.DataFrame(rows, schema=schema)
