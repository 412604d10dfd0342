"""Planted vs recovered for the causal table of a synthetic run: each row's planted effect (the mean over its pairs
of what the generator's law plants, `synthetic.planted_causal.pair_truth`, from the texts each attempt actually
read) beside the table's estimate and interval, and whether the interval covers it.

The texts: the control read its source's SKILL.md (the control's `skill_from`); the intervention read its stored
hand-off (`hand_off.md`, written by the trial task), nothing for a budget-matched solo, and '' when it was skipped
for an empty hand-off. Pairs whose hand-off was the control's exact text plant 0. Nothing here reads an outcome:
the estimate comes from `causal.causal_table`, the truth from the spec and the texts.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Optional, Sequence

import polars as pl

from ..records.intervention import HAND_OFF_ARTIFACT
from ..store import RunStore
from ..synthetic import SyntheticSpec
from ..synthetic.planted_causal import TIE, pair_truth
from .causal import InterventionPair, causal_table, counted_pairs
from .outcomes import PairingRules

# Below this planted net (2 points of P(better) - P(worse)) an effect counts as null: its sign is a coin flip at any
# affordable run size, so only coverage is asked of it.
NULL_EFFECT = 0.02


def planted_effects(store: RunStore, pairs: Sequence[InterventionPair], spec: SyntheticSpec,
                    rules: PairingRules = PairingRules()) -> pl.DataFrame:
    """Per (intervention, model) and pooled (model 'all'): planted_net and planted_d_pass, the means over the
    pairs the causal table counts."""
    margin = rules.margin("gpu", True)
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for pair, _ in counted_pairs(pairs, rules):
        truth = TIE if pair.identical else pair_truth(
            spec, pair.model, pair.problem_id, pair.dsl, _treated_text(store, pair), _control_text(store, pair),
            margin)
        for key in ((pair.label, "all"), (pair.label, pair.model)):
            acc = sums[key]
            acc[0] += 1
            acc[1] += truth.net
            acc[2] += truth.d_pass
    rows = [{"intervention": label, "model": model, "planted_net": s[1] / s[0], "planted_d_pass": s[2] / s[0]}
            for (label, model), s in sums.items()]
    schema = {"intervention": pl.Utf8, "model": pl.Utf8, "planted_net": pl.Float64, "planted_d_pass": pl.Float64}
    return pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


def causal_calibration(store: RunStore, pairs: Sequence[InterventionPair], spec: SyntheticSpec,
                       rules: PairingRules = PairingRules(), table: Optional[pl.DataFrame] = None) -> pl.DataFrame:
    """The causal table joined with the planted effects, with `net_covered` / `d_pass_covered` (the planted value
    inside the row's interval) and `sign_right`: the estimate has the planted effect's sign, where that effect is
    material (|planted net| >= NULL_EFFECT); a planted effect below it is a null — no sign to get right — and counts
    as right when the interval covers it."""
    table = causal_table(pairs, rules) if table is None else table
    joined = table.join(planted_effects(store, pairs, spec, rules), on=["intervention", "model"], how="left")
    return joined.with_columns(
        net_covered=(pl.col("net_lo") <= pl.col("planted_net")) & (pl.col("planted_net") <= pl.col("net_hi")),
        d_pass_covered=(pl.col("d_pass_lo") <= pl.col("planted_d_pass"))
        & (pl.col("planted_d_pass") <= pl.col("d_pass_hi")),
        sign_right=pl.when(pl.col("planted_net").abs() < NULL_EFFECT)
        .then((pl.col("net_lo") <= pl.col("planted_net")) & (pl.col("planted_net") <= pl.col("net_hi")))
        .otherwise(pl.col("net").sign() == pl.col("planted_net").sign()))


def _control_text(store: RunStore, pair: InterventionPair) -> Optional[str]:
    return (store.skill_text(pair.control_source) or "") if pair.control_source else None


def _treated_text(store: RunStore, pair: InterventionPair) -> Optional[str]:
    if not pair.reads_skill:
        return None
    if pair.intervention.skipped:
        return ""
    return store.artifact_text(pair.intervention.trial_id, HAND_OFF_ARTIFACT) or ""
