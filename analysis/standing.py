"""Relative standing: how the source attempt's tier compares with the base's (above / same / below, on the order
fail < pass < pass2x) and the help and harm rates in each group. The paper (arXiv 2610.05014) reports, pooled over
models: source above base 71.2 % help / 8.1 % harm; below 10.6 % help / 53.8 % harm."""
from __future__ import annotations

from collections import defaultdict
from typing import Literal, Sequence

import polars as pl

from .cells import CellReplicate, group_key
from .paired import PairingRules, outcome

Standing = Literal["above", "same", "below"]
STANDINGS: tuple[Standing, ...] = ("above", "same", "below")


def standing(cr: CellReplicate) -> Standing:
    """The source's tier relative to the base's (both must have run)."""
    assert cr.source is not None and cr.base is not None
    s, b = cr.source.rank, cr.base.rank
    return "above" if s > b else ("below" if s < b else "same")


def standing_table(replicates: Sequence[CellReplicate], by: Sequence[str] = ("model",),
                   rules: PairingRules = PairingRules()) -> pl.DataFrame:
    """One row per group and standing: n (resolved cell-replicates), n_help, n_harm, help_rate, harm_rate (None
    when n is 0). Every standing appears in every group, with n 0 when none fell in it."""
    by = list(by)
    counts: dict[tuple, dict[str, int]] = defaultdict(lambda: {"n": 0, "help": 0, "harm": 0})
    groups = set()
    for cr in replicates:
        if not cr.resolved:
            continue
        key = group_key(cr, by)
        groups.add(key)
        c = counts[key + (standing(cr),)]
        c["n"] += 1
        result = outcome(cr, rules)
        if result != "neutral":
            c[result] += 1
    rows = []
    for key in sorted(groups):
        for s in STANDINGS:
            c = counts.get(key + (s,), {"n": 0, "help": 0, "harm": 0})
            rows.append({**dict(zip(by, key)), "standing": s, "n": c["n"], "n_help": c["help"], "n_harm": c["harm"],
                         "help_rate": c["help"] / c["n"] if c["n"] else None,
                         "harm_rate": c["harm"] / c["n"] if c["n"] else None})
    schema = {**{k: pl.Utf8 for k in by}, "standing": pl.Utf8, "n": pl.Int64, "n_help": pl.Int64,
              "n_harm": pl.Int64, "help_rate": pl.Float64, "harm_rate": pl.Float64}
    return pl.DataFrame(rows, schema=schema)
