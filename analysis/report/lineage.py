"""The report's claim-propagation section: the headline table (`propagation.headline_table` over
`lineage_data.load_lineage`, with the labels and matcher `claims.load_claims` chose), the chain hops behind each
category's row, the closure category's headline corrected for the annotator's measured error (as `mkb lineage`
prints it), and the survival and prevalence plots (`lineage_plots`).
"""
from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import polars as pl

from ...store import RunStore
from ..chains import closure_harm
from ..lineage_data import LineageData, load_lineage
from ..paired import PairingRules
from ..propagation import UNANNOTATED, headline_table, index_chains, prevalence, survival
from .claims import ClaimData
from .trials import TrialIndex
from .views import Column, Members, TableView, integer, number, text

log = logging.getLogger(__name__)


# -- the propagation section --------------------------------------------------------------------------------------
@dataclass
class LineageSection:
    """The section's table and plots (None: not drawn); `problem` says why there is no table when the store's
    lineage could not be read (e.g. edges left behind by a hop that was reset and not matched again)."""

    headline: Optional[TableView]
    survival_svg: Optional[Path] = None
    prevalence_svg: Optional[Path] = None
    n_chains: int = 0
    n_claims: int = 0
    n_edges: int = 0
    problem: Optional[str] = None
    closure_harm: Optional[dict] = None    # analysis.chains.closure_harm of the closure category
    corrected: Optional[TableView] = None  # the closure headline corrected for the annotator's gold error
    gated: Optional[TableView] = None      # verification-gated chains against plain ones (analysis/gate_chains.py)


CLOSURE = "unsupported_closure"


def _hops_with(lineage: LineageData, trials: TrialIndex) -> dict[str, list[str]]:
    """category -> the chain hops (trial ids, chain then hop order) whose SKILL.md holds a claim of it."""
    out: dict[str, dict[str, None]] = defaultdict(dict)
    for n in sorted(lineage.nodes, key=lambda n: (n.chain_id, n.hop)):
        tid = trials.hop_trial.get((n.chain_id, n.hop))
        if tid is not None:
            out[n.category or UNANNOTATED][tid] = None
    return {c: list(ids) for c, ids in out.items()}


def lineage_section(store: RunStore, claims: ClaimData, trials: TrialIndex, plots_dir: Path,
                    n_boot: int, rules: PairingRules = PairingRules()) -> LineageSection:
    """The headline table with, per category row, the hops it aggregates; survival (closure category) and
    prevalence plots written under `plots_dir`. An empty section when the store holds no lineage edges."""
    if not (claims.matcher and claims.annotator and claims.taxonomy):
        return LineageSection(None)
    every = load_lineage(store, claims.matcher, claims.annotator, claims.taxonomy)
    lineage = every.plain()   # the headline and plots describe the plain chains; gated twins get their own table
    if not lineage.nodes:
        return LineageSection(None, gated=_gated_view(every, claims, rules, n_boot, trials))
    cats = claims.categories or None
    try:
        # One index for the headline, the survival curve and the prevalence plot: ~7 s of a chain-100 report.
        chains = index_chains(lineage.nodes, lineage.edges)
        frame = headline_table(chains, lineage.edges, categories=cats)
    except ValueError as err:   # the metrics refuse an inconsistent lineage (an edge to a claim of no hop)
        log.warning("lineage tables not computed: %s", err)
        return LineageSection(None, problem=str(err))
    hops = _hops_with(lineage, trials)
    members = [Members(f"Chain hops whose SKILL.md holds a {row['category']} claim",
                       trial_ids=tuple(hops.get(row["category"], ())))
               for row in frame.iter_rows(named=True)]
    columns = [Column("category", text("category"), False)] + [
        Column(c.replace("_", " "), number(c)) for c in frame.columns if c != "category"]
    n_chains = len({n.chain_id for n in lineage.nodes})
    view = TableView("lineage_headline", "Claim propagation (headline)", frame, columns, members,
                     f"{n_chains} chain(s), {len(lineage.nodes)} claims, {len(lineage.edges)} edges; annotations "
                     f"{claims.labels}, matcher {claims.matcher}. Point estimates (docs/metrics.md, 'Propagation').")
    section = LineageSection(view, n_chains=n_chains, n_claims=len(lineage.nodes), n_edges=len(lineage.edges))
    if lineage.outcomes and CLOSURE in (claims.categories or [CLOSURE]):
        section.closure_harm = closure_harm(lineage.nodes, lineage.edges, lineage.outcomes, CLOSURE, rules,
                                            n_boot=n_boot)
    section.corrected = _corrected_view(lineage, claims, n_boot)
    section.gated = _gated_view(every, claims, rules, n_boot, trials)
    _plots(section, lineage, chains, claims, plots_dir, n_boot)
    return section


def _gated_view(lineage: LineageData, claims: ClaimData, rules: PairingRules, n_boot: int,
                trials: TrialIndex) -> Optional[TableView]:
    """Gated chains against plain ones: closure survival and share, help and harm per hop (None: no gated chain)."""
    if not any(v.startswith("gate-") for v in lineage.variants.values()):
        return None
    from ..gate_chains import UNGATED, gate_chain_table

    closure = claims.closure or CLOSURE
    frame = gate_chain_table(lineage, lineage.variants, rules, closure, n_boot=n_boot)
    hops_of: dict[str, list[str]] = defaultdict(list)
    for (chain_id, _hop), tid in sorted(trials.hop_trial.items()):
        variant = lineage.variants.get(chain_id)
        if variant is not None and (variant == "" or variant.startswith("gate-")):
            hops_of[variant.removeprefix("gate-") or UNGATED].append(tid)
    members = [Members(f"Hops of the {row['gate']} chains", trial_ids=tuple(hops_of.get(row["gate"], ())))
               for row in frame.iter_rows(named=True)]
    columns = [Column("gate", text("gate"), False), Column("chains", integer("chains")),
               Column(f"{closure} survival, 1 hop", number("survival_1", ci=True)),
               Column("2 hops", number("survival_2", ci=True)),
               Column(f"{closure} share, last hop", number("closure_share_last", ci=True)),
               Column("hops ≥ 1", integer("hops")), Column("help", number("help", ci=True)),
               Column("harm", number("harm", ci=True)), Column("Δhelp vs none", number("d_help", ci=True, sign=True)),
               Column("Δharm vs none", number("d_harm", ci=True, sign=True))]
    return TableView("gated_chains", "Verification gate: gated chains against plain ones", frame, columns, members,
                     f"Each gated chain is the twin of a plain chain (same model, problem, start DSL); each of its "
                     f"hops read the previous SKILL.md with the claims its verdicts did not back removed or marked. "
                     f"Survival: Kaplan-Meier share of {closure} lineages with a live descendant 1 and 2 hops on "
                     f"(bootstrap over chains); share: mean over chains of the last hop's {closure} share; help and "
                     f"harm: hops ≥ 1 against the (twin's) solo baseline, intervals resampling problems. The "
                     f"propagation headline above describes the plain chains only (docs/metrics.md).")


def _corrected_view(lineage: LineageData, claims: ClaimData, n_boot: int) -> Optional[TableView]:
    """The closure category's prevalence, survival and reinforced share as labelled and corrected for the
    annotator's measured error on the gold test split (as `mkb lineage` prints them), with that error in the note;
    None when the annotator has no recorded gold scores."""
    from ...claims.annotator_error import recorded_error
    from ..annotator_correction import corrected_prevalence
    from ..lineage_correction import corrected_lineage_metrics

    closure = claims.closure or CLOSURE
    error = recorded_error(claims.annotator or "")
    if error is None:
        return None
    prevalence_row = corrected_prevalence(lineage.nodes, error, [closure], n_boot=n_boot).select(
        pl.lit(closure).alias("category"), pl.lit("prevalence (mean over hops)").alias("metric"), "raw", "raw_lo",
        "raw_hi", "corrected", "corrected_lo", "corrected_hi")
    lineage_rows = corrected_lineage_metrics(lineage.nodes, lineage.edges, error, closure, n_boot=n_boot).select(
        "category", "metric", "raw", "raw_lo", "raw_hi", "corrected", "corrected_lo", "corrected_hi")
    frame = pl.concat([prevalence_row, lineage_rows], how="vertical_relaxed")
    score = error.per_category.get(closure)
    measured = (f"on the hand-labelled {error.split} split ({error.claims} claims) annotator {error.annotator} has "
                f"category accuracy {error.category_accuracy:.2f}" +
                (f"; for {closure} precision {score.precision:.2f}, recall {score.recall:.2f} ({score.gold} gold "
                 f"claims)" if score else ""))
    columns = [Column("category", text("category"), False), Column("metric", text("metric"), False),
               Column("as labelled", number("raw", ci=True)), Column("corrected", number("corrected", ci=True))]
    return TableView("lineage_corrected", f"{closure}: as labelled and corrected for the annotator's error", frame,
                     columns, [None] * frame.height,
                     f"{measured}. Corrected: prevalence by Rogan–Gladen, survival and reinforced share by the "
                     f"labelled sample's purity (docs/metrics.md, 'The headline carries the annotator's error'); "
                     f"95 % intervals resample chains and redraw the gold counts.")


def _plots(section: LineageSection, lineage: LineageData, chains: Any, claims: ClaimData, plots_dir: Path,
           n_boot: int) -> None:
    from ..lineage_plots import plot_prevalence, plot_survival

    cats: Optional[Sequence[str]] = claims.categories or None
    prev = prevalence(chains, cats, n_boot=n_boot)
    if not prev.is_empty():
        section.prevalence_svg = _svg(plot_prevalence(prev, plots_dir / "prevalence", categories=cats))
    closure = claims.closure or (claims.categories[0] if claims.categories else None)
    curves = survival(chains, lineage.edges, closure, n_boot=n_boot) if closure else None
    if curves is not None and not curves.is_empty():
        section.survival_svg = _svg(plot_survival(curves, plots_dir / "survival",
                                                  title=f"Survival of {closure} lineages"))


def _svg(paths: Optional[Sequence[Path]]) -> Optional[Path]:
    """The SVG among a plot function's written files (None when it drew nothing)."""
    return next((p for p in paths or () if p.suffix == ".svg"), None)
