"""MetaKernelBench's R@t ladder, S and lift, and source/skill coverage — the one implementation of them
(`mkb export`'s results.json and `mkb report` both call it).

As MKB computes them (`metakernelbench/results.py`): over the *resolved* cell-replicates (all three attempts ran),
R@t is the share that passed with a speedup over eager of at least t, t in SPEED_THRESHOLDS (R@0 is the pass
rate), S = 100 × the mean of the five; the skill arm's ladder counts a skipped skill attempt (its source wrote no
SKILL.md) as its base, since nothing was transferred; lift = skill − base, per rung. Coverage: the share of
resolved cell-replicates whose source passed (source) and whose source wrote a SKILL.md (skill).
"""
from __future__ import annotations

import statistics
from typing import Optional, Sequence, Union

import numpy as np
import polars as pl

from .bootstrap import Bootstrap, per_unit_sums
from .cells import Attempt, CellReplicate, group_key
from .pairs import PairTable

SPEED_THRESHOLDS: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0, 4.0)
RUNGS: tuple[str, ...] = tuple(f"R@{t:g}" for t in SPEED_THRESHOLDS) + ("S",)


def attains(attempt: Attempt, threshold: float) -> bool:
    """Passed, with a speedup over eager of at least `threshold` (MKB: speedup_vs_eager is 0 unless passed)."""
    return attempt.passed and (attempt.speedup or 0.0) >= threshold


def ladder(attempts: Sequence[Attempt]) -> dict[str, float]:
    """R@t for every threshold and S, over `attempts` (at least one)."""
    rates = {f"R@{t:g}": statistics.mean(attains(a, t) for a in attempts) for t in SPEED_THRESHOLDS}
    return {**rates, "S": 100 * statistics.mean(rates.values())}


def skill_outcome(cr: CellReplicate) -> Attempt:
    """The skill arm's attempt as the ladder counts it: the base when the skill attempt was skipped."""
    assert cr.skill is not None and cr.base is not None
    return cr.base if cr.skill.skipped else cr.skill


def contrast(resolved: Sequence[CellReplicate]) -> dict[str, Optional[dict[str, float]]]:
    """{base, skill, lift} ladders over resolved cell-replicates (all None when there are none)."""
    if not resolved:
        return {"base": None, "skill": None, "lift": None}
    base = ladder([cr.base for cr in resolved if cr.base is not None])
    skill = ladder([skill_outcome(cr) for cr in resolved])
    return {"base": base, "skill": skill, "lift": {rung: skill[rung] - base[rung] for rung in base}}


def coverage(resolved: Sequence[CellReplicate]) -> dict[str, Optional[float]]:
    """source_coverage (source passed) and skill_coverage (source wrote a SKILL.md), shares of resolved."""
    if not resolved:
        return {"source_coverage": None, "skill_coverage": None}
    return {"source_coverage": statistics.mean(cr.source is not None and cr.source.passed for cr in resolved),
            "skill_coverage": statistics.mean(cr.skill is not None and not cr.skill.skipped for cr in resolved)}


def group_summary(replicates: Sequence[CellReplicate]) -> dict:
    """MKB's per-group metrics: counts, coverage, the contrast, with_skill, by_source_verdict."""
    resolved = [cr for cr in replicates if cr.resolved]
    return {"n_cell_replicates": len(replicates), "n_resolved": len(resolved), **coverage(resolved),
            **contrast(resolved),
            "with_skill": contrast([cr for cr in resolved if not cr.skill.skipped]),  # type: ignore[union-attr]
            "by_source_verdict": {
                "passed": contrast([cr for cr in resolved if cr.source.passed]),  # type: ignore[union-attr]
                "failed": contrast([cr for cr in resolved if not cr.source.passed])}}  # type: ignore[union-attr]


def ladder_table(replicates: Union[PairTable, Sequence[CellReplicate]], by: Sequence[str] = ("model", "direction"),
                 n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> pl.DataFrame:
    """One row per group: n_resolved, source/skill coverage, base_<rung>, skill_<rung>, lift_<rung> for every rung,
    and bootstrap bounds of lift_S (lift_S_lo, lift_S_hi; `bootstrap.Bootstrap`, resampling problems)."""
    if isinstance(replicates, PairTable):
        replicates = replicates.replicates
    by = list(by)
    boot = Bootstrap(n_boot, seed, level)
    groups: dict[tuple, dict[tuple, list[CellReplicate]]] = {}
    for cr in replicates:
        if cr.resolved:
            groups.setdefault(group_key(cr, by), {}).setdefault(cr.cell_key, []).append(cr)
    rng = boot.rng()
    rows = []
    for key, cells in sorted(groups.items()):
        flat = [cr for reps in cells.values() for cr in reps]
        both = contrast(flat)
        row = {**dict(zip(by, key)), "n_cells": len(cells), "n_resolved": len(flat), **coverage(flat)}
        for arm in ("base", "skill", "lift"):
            row.update({f"{arm}_{rung}": both[arm][rung] for rung in RUNGS})  # type: ignore[index]
        row["lift_S_lo"] = row["lift_S_hi"] = None
        if n_boot > 0:
            # Per cell: (sum of skill S-points, sum of base S-points, replicates), summed per problem, so a
            # resample is three sums.
            per_cell = np.array([[sum(_s_points(skill_outcome(cr)) for cr in reps),
                                  sum(_s_points(cr.base) for cr in reps), len(reps)]  # type: ignore[arg-type]
                                 for reps in cells.values()], dtype=float)
            units = [reps[0].problem_id for reps in cells.values()]
            row["lift_S_lo"], row["lift_S_hi"] = boot.of(per_unit_sums(units, per_cell),
                                                         lambda sums: 100 * (sums[:, 0] - sums[:, 1]) / sums[:, 2],
                                                         rng)
        rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame(
        schema={**{k: pl.Utf8 for k in by}, "n_cells": pl.Int64, "n_resolved": pl.Int64})


def _s_points(attempt: Attempt) -> float:
    """An attempt's contribution to S / 100: the share of the five rungs it attains."""
    return sum(attains(attempt, t) for t in SPEED_THRESHOLDS) / len(SPEED_THRESHOLDS)
