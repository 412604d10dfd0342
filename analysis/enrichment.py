"""Category enrichment: is a claim category more often present in skills that helped than in skills that harmed?

For each category c: presence_help = the share of helped cell-replicates whose source SKILL.md holds at least one
claim annotated c, presence_harm the same over harmed ones, and enrichment = presence_harm − presence_help (positive:
more frequent in harmful skills), with a bootstrap interval resampling problems (`bootstrap.Bootstrap`; a problem's
helped and harmed pairs share its solo attempts, so they are drawn together). The paper (arXiv 2610.05014):
unsupported closures 7–17 points more frequent in harmful skills for five of six models. Skipped skill attempts
are neutral, so they never enter.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Optional, Sequence, Union

import numpy as np
import polars as pl

from ..store import RunStore
from .cells import CellReplicate, group_key
from .bootstrap import Bootstrap, per_unit_sums
from .outcomes import PairingRules
from .pairs import PairTable, as_pairs


def skill_categories(store: RunStore, skill_shas: Iterable[str], annotator: str, taxonomy: str
                     ) -> dict[str, frozenset[str]]:
    """The categories annotated (by `annotator` under `taxonomy`) on each SKILL.md's claims. A SKILL.md without
    annotated claims (never segmented, not annotated, or no claims) is absent: its cells are left out of the
    enrichment rather than counted as holding no category."""
    by_skill = store.claims.claims_by_skill(set(skill_shas))
    notes = store.claims.annotations(annotator, taxonomy, [c.claim_id for cs in by_skill.values() for c in cs])
    out = {}
    for sha, claims in by_skill.items():
        labels = [notes[c.claim_id] for c in claims if c.claim_id in notes]
        if labels:
            out[sha] = frozenset(a.category for a in labels if a.status == "annotated" and a.category)
    return out


def enrichment_table(replicates: Union[PairTable, Sequence[CellReplicate]],
                     categories_of: Mapping[str, frozenset[str]], categories: Sequence[str],
                     by: Sequence[str] = ("model",), rules: Optional[PairingRules] = None, n_boot: int = 1000,
                     seed: int = 0, level: float = 0.95) -> pl.DataFrame:
    """One row per group and category: n_help, n_harm (cell-replicates with a known source skill), presence_help,
    presence_harm, enrichment and its interval (None without resamples or when a side is empty)."""
    table = as_pairs(replicates, rules)
    by = list(by)
    boot = Bootstrap(n_boot, seed, level)
    rng = boot.rng()
    # group -> (units, per pair: [helped, harmed, helped with c..., harmed with c...])
    sides: dict[tuple, tuple[list[str], list[list[float]]]] = {}
    for p in table:
        sha = p.cr.source.skill_sha if p.cr.source is not None else None
        if p.outcome == "neutral" or sha not in categories_of:
            continue
        present = [float(c in categories_of[sha]) for c in categories]  # type: ignore[index]
        helped = p.outcome == "help"
        units, values = sides.setdefault(group_key(p.cr, by), ([], []))
        units.append(p.unit)
        values.append([float(helped), float(not helped), *(x * helped for x in present),
                       *(x * (not helped) for x in present)])
    rows = []
    k = len(categories)
    for key, (units, values) in sorted(sides.items()):
        per_pair = np.array(values, dtype=float).reshape(-1, 2 + 2 * k)
        total = per_pair.sum(0)
        sums = boot.resampled_sums(per_unit_sums(units, per_pair), rng) if n_boot > 0 else None
        for i, category in enumerate(categories):
            n_help, n_harm = int(total[0]), int(total[1])
            p_help = total[2 + i] / n_help if n_help else None
            p_harm = total[2 + k + i] / n_harm if n_harm else None
            lo = hi = None
            if sums is not None and n_help and n_harm:
                with np.errstate(invalid="ignore", divide="ignore"):
                    lo, hi = boot.interval(sums[:, 2 + k + i] / sums[:, 1] - sums[:, 2 + i] / sums[:, 0])
            rows.append({**dict(zip(by, key)), "category": category, "n_help": n_help, "n_harm": n_harm,
                         "presence_help": p_help, "presence_harm": p_harm,
                         "enrichment": _diff(p_harm, p_help), "enrichment_lo": lo, "enrichment_hi": hi})
    schema = {**{k: pl.Utf8 for k in by}, "category": pl.Utf8, "n_help": pl.Int64, "n_harm": pl.Int64,
              "presence_help": pl.Float64, "presence_harm": pl.Float64, "enrichment": pl.Float64,
              "enrichment_lo": pl.Float64, "enrichment_hi": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def _diff(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a - b if a is not None and b is not None else None
