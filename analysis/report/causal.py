"""The causal table for the report (issue 29): each intervention arm against its control, as `analysis.causal`
computes it, one row per (intervention, model) with the pooled rows (model 'all') first, each row linking to the
trials behind it — every intervention attempt it counts and its control. A synthetic run whose verdicts were drawn
also gets each row's planted net effect and whether the row's interval covers it (`analysis.causal_calibration`).

Also what an intervention trial's page adds: the hand-off the attempt read (`hand_off.md`) and the trial it is the
twin of (the control skill attempt, or for a gated chain's hop the same hop of its ungated chain).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import polars as pl

from ...records import chain_id_of
from ...records.intervention import HAND_OFF_ARTIFACT, control_trial_id, parse_arm
from ...store import RunStore, TrialRow
from ..bootstrap import Bootstrap
from ..causal import InterventionPair, causal_table, counted_pairs, intervention_pairs
from ..paired import PairingRules
from .context import Artifact, PageContext, artifact
from .data import noise_text
from .views import DASH, Column, Members, Row, TableView, integer, number, text

CAUSAL_TABLE = "causal"
POOLED = "all"


@dataclass(frozen=True)
class CausalSection:
    """The index's causal section of a run with intervention trials: its table, or why there is none (`problem`:
    no intervention attempt and its control have both run yet), and for a synthetic run why its planted effects are
    not shown (`unplanted`)."""

    view: Optional[TableView] = None
    problem: Optional[str] = None
    synthetic: bool = False
    unplanted: Optional[str] = None


def _members(pairs: Sequence[InterventionPair], rules: PairingRules) -> dict[tuple[str, str], Members]:
    """The trials behind each row, by (intervention, model): each pair the table counts, intervention first, then
    its control."""
    ids: dict[tuple[str, str], list[str]] = defaultdict(list)
    for p, _ in counted_pairs(pairs, rules):
        for key in ((p.label, POOLED), (p.label, p.model)):
            ids[key] += [p.intervention.trial_id, p.control.trial_id]
    return {(label, model): Members(f"Intervention {label}, model {model}: each intervention attempt and its "
                                    f"control", trial_ids=tuple(dict.fromkeys(trials)))
            for (label, model), trials in ids.items()}


def _covered(row: Row) -> str:
    value = row.get("net_covered")
    return DASH if value is None else ("✓" if value else "✗")


def _columns(planted: bool) -> list[Column]:
    columns = [Column("intervention", text("intervention"), numeric=False), Column("model", text("model"), False),
               Column("pairs", integer("n")), Column("identical (not run)", integer("n_identical")),
               Column("help", number("help")), Column("harm", number("harm")),
               Column("net", number("net", ci=True, sign=True)),
               Column("net where changed", number("net_changed", ci=True, sign=True)),
               Column("Δpass", number("d_pass", ci=True, sign=True)), Column("ΔT", number("d_T", ci=True, sign=True)),
               Column("ΔH", number("d_H", ci=True, sign=True))]
    if planted:
        columns += [Column("planted net", number("planted_net", sign=True)), Column("covered", _covered, False)]
    return columns


def _pooled_first(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort(pl.col("model") != POOLED, "intervention", "model", maintain_order=True)


def causal_view(store: RunStore, results: Sequence[dict[str, Any]], rules: PairingRules, n_boot: int,
                synthetic: bool) -> Optional[CausalSection]:
    """The causal section of the run whose result rows (`cells.result_rows`) are `results`; None when it holds no
    intervention trial."""
    if not any(r["kind"] == "intervention" for r in results):
        return None
    pairs = intervention_pairs(results)
    frame = causal_table(pairs, rules, Bootstrap(n_boot=n_boot))
    if frame.is_empty():
        return CausalSection(problem="none: no intervention attempt and its control have both run yet",
                             synthetic=synthetic)
    unplanted = None
    if synthetic:
        from ..calibration import run_spec
        from ..causal_calibration import causal_calibration

        spec = run_spec(store.meta())
        if spec is None:
            unplanted = "the run's verdicts were not drawn by the synthetic generator: nothing was planted"
        else:
            try:
                frame = causal_calibration(store, pairs, spec, rules, frame)
            except ValueError as error:
                unplanted = f"the planted effects could not be derived ({error})"
    frame = _pooled_first(frame)
    planted = "planted_net" in frame.columns
    by_row = _members(pairs, rules)
    members: list[Optional[Members]] = [by_row.get((row["intervention"], row["model"]))
                                        for row in frame.iter_rows(named=True)]
    n_identical = int(frame.filter(pl.col("model") == POOLED)["n_identical"].sum())
    note = (("SYNTHETIC: models and judges were replaced by calibrated random draws. " if synthetic else "")
            + f"help / harm: share of pairs where the intervention attempt beats / loses to its control (the "
            f"paired rule, margin: {noise_text(rules)}); net = help − harm; net where changed: over the pairs whose "
            f"hand-off differed from the control's SKILL.md; Δpass: the intervention's pass rate − the control's; "
            f"ΔT, ΔH: the change in the help and harm rates against the solo base. Identical hand-offs "
            f"({n_identical} in the pooled rows) were not run and count as ties. Intervals: bootstrap over problems, "
            f"{n_boot} resamples.")
    if planted:
        note += (" planted net: what the synthetic generator's law plants for these pairs, from the texts each "
                 "attempt read (never from an outcome); covered: the planted value lies inside the net interval.")
    title = "Intervention arms against their controls" + (" (SYNTHETIC)" if synthetic else "")
    view = TableView(CAUSAL_TABLE, title, frame, _columns(planted), members, note)
    return CausalSection(view, synthetic=synthetic, unplanted=unplanted)


# -- an intervention trial's page ------------------------------------------------------------------------------
@dataclass(frozen=True)
class HandOffView:
    """What an intervention trial's page adds: its row label, the hand-off it read (`hand_off.sha` None: it stored
    none — a budget-matched solo reads nothing), the trial it is the twin of (`twin`; None: no such hop)
    and what that twin is (`twin_what`)."""

    label: str
    hand_off: Artifact
    twin: Optional[str]
    twin_what: str


def hand_off_view(ctx: PageContext, row: TrialRow) -> Optional[HandOffView]:
    """The intervention part of a trial's page; None for a trial that is no intervention."""
    try:
        ref = parse_arm(row.arm_name)
    except ValueError:
        return None
    if ref is None:
        return None
    sha = ctx.trials.artifacts.get(row.trial_id, {}).get(HAND_OFF_ARTIFACT)
    hand_off = artifact(ctx, sha, HAND_OFF_ARTIFACT)
    if ref.twin_chain is not None:
        twin = ctx.trials.hop_trial.get((chain_id_of(row.model, row.problem_id, ref.twin_chain), row.hop or 0))
        return HandOffView(ref.label, hand_off, twin, f"hop {row.hop} of ungated chain {ref.twin_chain}")
    try:
        control = control_trial_id(row.trial_id, ref)
    except ValueError:
        return None
    return HandOffView(ref.label, hand_off, control, "control")
