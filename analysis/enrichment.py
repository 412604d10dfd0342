"""Category enrichment: is a claim category more often present in skills that helped than in skills that harmed?

For each category c: presence_help = the share of helped cell-replicates whose source SKILL.md holds at least one
claim annotated c, presence_harm the same over harmed ones, and enrichment = presence_harm − presence_help (positive:
more frequent in harmful skills), with a percentile-bootstrap interval that resamples helped and harmed
cell-replicates separately. The paper (arXiv 2610.05014): unsupported closures 7–17 points more frequent in harmful
skills for five of six models. Skipped skill attempts are neutral, so they never enter.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Optional, Sequence

import numpy as np
import polars as pl

from ..store import RunStore
from .cells import CellReplicate, group_key
from .paired import PairingRules, outcome


def skill_categories(store: RunStore, skill_shas: Iterable[str], annotator: str, taxonomy: str
                     ) -> dict[str, frozenset[str]]:
    """The categories annotated (by `annotator` under `taxonomy`) on each SKILL.md's claims. A SKILL.md without
    annotated claims (never segmented, not annotated, or no claims) is absent: its cells are left out of the
    enrichment rather than counted as holding no category."""
    by_skill = store.claims_by_skill(set(skill_shas))
    notes = store.annotations(annotator, taxonomy, [c.claim_id for cs in by_skill.values() for c in cs])
    out = {}
    for sha, claims in by_skill.items():
        labels = [notes[c.claim_id] for c in claims if c.claim_id in notes]
        if labels:
            out[sha] = frozenset(a.category for a in labels if a.status == "annotated" and a.category)
    return out


def enrichment_table(replicates: Sequence[CellReplicate], categories_of: Mapping[str, frozenset[str]],
                     categories: Sequence[str], by: Sequence[str] = ("model",), rules: PairingRules = PairingRules(),
                     n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> pl.DataFrame:
    """One row per group and category: n_help, n_harm (cell-replicates with a known source skill), presence_help,
    presence_harm, enrichment and its interval (None without resamples or when a side is empty)."""
    by = list(by)
    rng = np.random.default_rng(seed)
    sides: dict[tuple, dict[str, list[frozenset[str]]]] = {}
    for cr in replicates:
        if not cr.resolved or cr.source is None or cr.source.skill_sha not in categories_of:
            continue
        result = outcome(cr, rules)
        if result == "neutral":
            continue
        sides.setdefault(group_key(cr, by), {"help": [], "harm": []})[result].append(
            categories_of[cr.source.skill_sha])  # type: ignore[index]
    rows = []
    for key, side in sorted(sides.items()):
        for category in categories:
            helped = np.array([category in s for s in side["help"]], dtype=float)
            harmed = np.array([category in s for s in side["harm"]], dtype=float)
            p_help = float(helped.mean()) if helped.size else None
            p_harm = float(harmed.mean()) if harmed.size else None
            lo = hi = None
            if n_boot > 0 and helped.size and harmed.size:
                reps = (harmed[rng.integers(0, harmed.size, (n_boot, harmed.size))].mean(1)
                        - helped[rng.integers(0, helped.size, (n_boot, helped.size))].mean(1))
                lo, hi = (float(x) for x in np.percentile(reps, [50 * (1 - level), 50 * (1 + level)]))
            rows.append({**dict(zip(by, key)), "category": category, "n_help": int(helped.size),
                         "n_harm": int(harmed.size), "presence_help": p_help, "presence_harm": p_harm,
                         "enrichment": _diff(p_harm, p_help), "enrichment_lo": lo, "enrichment_hi": hi})
    schema = {**{k: pl.Utf8 for k in by}, "category": pl.Utf8, "n_help": pl.Int64, "n_harm": pl.Int64,
              "presence_help": pl.Float64, "presence_harm": pl.Float64, "enrichment": pl.Float64,
              "enrichment_lo": pl.Float64, "enrichment_hi": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def _diff(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a - b if a is not None and b is not None else None
