"""index.html: the run's header, then one section per question — paired outcomes, the MKB ladder, standing, reverse
coupling, per-problem lift, enrichment, failure attribution, intervention arms (runs that have them), planted vs
recovered (synthetic runs), chains, claim propagation — each a table linking its rows to the trials behind them, or
a line saying why there is none.

Each section's content is put together here from the macros of blocks.html.j2 and index_parts.html.j2 (Markup,
escaped where rendered); index.html.j2 writes the page around them.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple, Optional, Sequence

from markupsafe import Markup

from .causal import CausalSection
from .claims import ClaimData
from .html import macros, own_svg, render
from .lineage import LineageSection
from .pair_pages import PAIRS_INDEX
from .plots import inline_svg
from .trials import TRIALS_DIR, TrialIndex
from .views import TableView


@dataclass(frozen=True)
class RunHeader:
    """What the top of the index names."""

    name: str
    config_hash: Optional[str]
    targets: tuple[str, ...]
    synthetic: bool
    created_at: Optional[str]
    counts: tuple[tuple[str, int], ...]      # (kind/status label, trials)


def run_header(meta: dict, trials: TrialIndex) -> RunHeader:
    """The header from the store's meta (its config's name) and the trials (kinds and statuses counted)."""
    try:
        config = json.loads(meta.get("config_json") or "{}")
    except ValueError:
        config = {}
    name = config.get("name") if isinstance(config, dict) else None
    synthetic = bool(meta.get("synthetic")) or any(r.synthetic for r in trials.rows)
    kinds = Counter(r.kind for r in trials.rows)
    statuses = Counter(r.status for r in trials.rows)
    return RunHeader(name=str(name or "unnamed run"), config_hash=meta.get("config_hash"),
                     targets=tuple(sorted({r.target for r in trials.rows})), synthetic=synthetic,
                     created_at=meta.get("created_at"),
                     counts=tuple(sorted(kinds.items())) + tuple(sorted(statuses.items())))


@dataclass(frozen=True)
class Calibration:
    """The planted-vs-recovered section of a synthetic run: its table, or why there is none (`problem`)."""

    view: Optional[TableView] = None
    problem: Optional[str] = None


class Section(NamedTuple):
    anchor: str
    title: str
    content: Markup


class ClosureHarm(NamedTuple):
    """analysis.chains.closure_harm's result as the index words it (figures to 3 places, '–' for none)."""

    n_hops: int
    n_chains: int
    harm_none: str
    harm_some: str
    slope: str


def closure_harm(result: Optional[dict[str, Any]]) -> Optional[ClosureHarm]:
    """Does the share of closures a hop received predict harm there? None: no hop to say it of."""
    if not result or not result.get("n_hops"):
        return None

    def f(key: str) -> str:
        value = result.get(key)
        return "–" if value is None else f"{value:.3f}"
    slope = f("slope") + (f" [{f('slope_lo')}, {f('slope_hi')}]" if result.get("slope_lo") is not None else "")
    return ClosureHarm(int(result["n_hops"]), int(result["n_chains"]), f("harm_rate_none"), f("harm_rate_some"), slope)


def index_page(header: RunHeader, bench: list[TableView], enrichment: Optional[TableView],
               chains: Optional[TableView], lineage: LineageSection, claims: ClaimData, lift_svg: Optional[str],
               links: Mapping[str, list[Optional[str]]], n_trials: int, n_replicates: int,
               calibration: Optional[Calibration] = None, attribution: Sequence[TableView] = (),
               causal: Optional[CausalSection] = None, containment: Optional[TableView] = None,
               chain_kinds: Optional[TableView] = None) -> str:
    """The whole of index.html."""
    b, parts = macros(), macros("index_parts.html.j2")

    def block(view: TableView) -> Markup:
        return b.view_block(view, links.get(view.name, []))

    no_bench = b.nothing("none: no resolved cell-replicate (its source, base and skill attempts must all have run "
                         "without an error)" if n_replicates else
                         "none: this run holds no benchmark cell-replicates (chain trials only, or nothing run yet)")
    by = {v.name: v for v in bench}

    # Markup("").join keeps the macros' blocks as the markup they are; a plain string among them would be escaped.
    def bench_block(*names: str, empty: Markup = no_bench) -> Markup:
        return Markup("").join(block(by[n]) for n in names) if not by[names[-1]].frame.is_empty() else empty

    sections = [
        Section("paired", "Paired outcomes (T, H, ΔGM)", bench_block("paired_by_model_direction", "paired_overall")),
        Section("ladder", "MKB ladder", bench_block("ladder")),
        Section("standing", "Relative standing", bench_block("standing")),
        Section("reverse", "Reverse-direction coupling", bench_block("reverse", empty=b.nothing(
            "none: no helped cell-replicate with a resolved reverse") if n_replicates else no_bench)),
        Section("lift", "Per-problem lift", b.plot(own_svg(lift_svg), "ΔGM per problem") + block(by["problem_lift"])
                if not by["problem_lift"].frame.is_empty() else no_bench),
        Section("enrichment", "Category enrichment", block(enrichment) if enrichment is not None else no_bench
                if not n_replicates else b.nothing(
                    "none: no helped or harmed cell-replicate has an annotated source SKILL.md" if claims.annotator
                    else "none: the store holds no claim annotations (run `mkb lineage` first)")),
        Section("attribution", "Why skills harmed (failure attribution)",
                Markup("").join(block(v) for v in attribution) if attribution
                else b.nothing("none: no harmed cell-replicate") if n_replicates else no_bench),
    ]
    if causal is not None:
        content = parts.causal_intro() + (block(causal.view) if causal.view is not None else b.nothing(causal.problem))
        if causal.unplanted:
            content += b.nothing(f"planted effects: none: {causal.unplanted}")
        sections.append(Section("causal", "Which claims cause help or harm (intervention arms)"
                                + (" (SYNTHETIC)" if causal.synthetic else ""), content))
    if containment is not None:
        sections.append(Section("containment", containment.title, block(containment)))
    if calibration is not None:
        sections.append(Section("calibration", "Planted vs recovered (SYNTHETIC)",
                                parts.calibration_intro() + block(calibration.view) if calibration.view is not None
                                else b.nothing(f"none: {calibration.problem}")))
    sections.append(Section("chains", "Chains: help and harm per hop",
                            (block(chains) + (block(chain_kinds) if chain_kinds is not None else ""))
                            if chains is not None else b.nothing("none: this run holds no chain hops")))
    if lineage.headline is not None:
        harm = closure_harm(lineage.closure_harm)
        content = (block(lineage.headline) + (block(lineage.corrected) if lineage.corrected is not None else "")
                   + (block(lineage.gated) if lineage.gated is not None else "")
                   + (parts.closure_harm(harm) if harm is not None else "")
                   + parts.lineage_plots(own_svg(inline_svg(lineage.survival_svg)),
                                         own_svg(inline_svg(lineage.prevalence_svg))))
    elif lineage.problem:
        content = b.nothing(f"none: the stored lineage could not be read ({lineage.problem}); rerun `mkb lineage`")
    else:
        content = b.nothing("none: the store holds no lineage edges (chains not matched yet: `mkb lineage`)")
    sections.append(Section("lineage", "Claim propagation along chains", content))
    sections.append(Section("trials", "Trials", parts.trials_note(n_trials, TRIALS_DIR, PAIRS_INDEX)))
    return render("index.html.j2", title=f"report: {header.name}", synthetic=header.synthetic, root="",
                  header=header, sections=sections)
