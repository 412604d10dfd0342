"""`render_report(run_dir, out_dir)`: read a run store once and write the static report.

    DIR/index.html            header, every table with links to the trials behind each row, plots
    DIR/trials.html           every trial of the run
    DIR/trials/<name>.html    one page per trial (transcript, submissions, kernel, highlighted SKILL.md)
    DIR/lists/<table>-<i>.html  the trials behind row i of a table
    DIR/tables/               <table>.csv, <table>.parquet, tables.md
    DIR/plots/                the lineage plots (PNG and SVG; the SVG is also inlined in index.html)

Failure attribution (analysis/report/attribution_views.py): the rule pass's causes per model and, when `mkb attribute`
stored LLM judgements, their agreement with the rules.

A run with intervention arms (issue 29) gets the causal table (analysis/report/causal.py): each intervention against its
control skill attempt, with, for a synthetic run, each row's planted effect beside it.

A synthetic run whose verdicts were drawn also gets "Planted vs recovered" (analysis/calibration.py): the rates its
spec plants beside what the analysis recovers.

Everything is read in a few batched queries first; the pages are then rendered from Jinja2 templates with
autoescaping (html.py: nothing a run holds reaches a page unescaped). Only the store is read (opened read-only: a
campaign may still be writing it).
"""
from __future__ import annotations

import multiprocessing
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Sequence

from ...store import RunStore, TrialRow
from ..cells import cell_replicates, result_rows
from ..enrichment import skill_categories
from ..paired import PairingRules
from .claims import load_claims
from .attribution_views import judge_views, rule_causes_view
from ..pairs import PairTable, score_pairs
from .pair_pages import (HOPS_DIR, PAIRS_DIR, PAIRS_INDEX, chain_hops_of, hop_name, hop_pages, pair_name, pair_page,
                         pairs_index)
from .causal import causal_view
from .containment import containment_view
from .data import (benchmark_views, calibration_view, chain_kinds_view, chain_view, enrichment_view,
                   source_skill_shas)
from .lineage import lineage_section
from .context import PageContext
from .index_page import Calibration, index_page, run_header
from .pages import LISTS_DIR, all_trials_page, list_page, trial_page
from .plots import problem_lift_svg
from .tables_out import write_tables
from .trials import TRIALS_DIR, load_trials
from .views import TableView


@dataclass(frozen=True)
class ReportOptions:
    """How the report is computed. `n_boot`: bootstrap resamples of the benchmark tables' intervals;
    `lineage_n_boot`: of the lineage plots' bands; annotator / taxonomy / matcher: None picks what the store holds
    (offline-v1 and mkb-11@1 when present)."""

    rules: PairingRules = PairingRules()
    n_boot: int = 1000
    lineage_n_boot: int = 200
    annotator: Optional[str] = None
    taxonomy: Optional[str] = None
    matcher: Optional[str] = None
    trial_pages: bool = True
    parallel_pages: Optional[bool] = None   # a second process writes trial pages; None: where fork and 2 cores are


@dataclass
class ReportSummary:
    """What was written, and how long each stage took (seconds)."""

    out_dir: Path
    index: Path
    synthetic: bool
    n_trials: int
    n_trial_pages: int
    n_list_pages: int
    tables: list[str]
    seconds: dict[str, float] = field(default_factory=dict)


def _write(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _write_pages(ctx: PageContext, rows: Sequence[TrialRow], folder: Path) -> None:
    for row in rows:
        _write(folder / ctx.trials.page[row.trial_id], trial_page(ctx, row))


def _write_paired_pages(ctx: PageContext, pairs: PairTable, hops: Sequence[tuple[str, int]], out: Path) -> None:
    """pairs/ (one page per resolved cell-replicate), hops/ (one per chain hop after the first) and pairs.html."""
    for folder in (PAIRS_DIR, HOPS_DIR):
        (out / folder).mkdir(exist_ok=True)
    for p in pairs:
        _write(out / PAIRS_DIR / pair_name(p), pair_page(ctx, p))
    for name, page in hop_pages(ctx, hops):
        _write(out / HOPS_DIR / name, page)
    _write(out / PAIRS_INDEX, pairs_index(ctx, list(pairs), hops))


def _parallel(asked: Optional[bool]) -> bool:
    if "fork" not in multiprocessing.get_all_start_methods():
        return False
    return asked if asked is not None else (os.cpu_count() or 1) >= 2


def _fork_pages(ctx: PageContext, rows: Sequence[TrialRow], folder: Path) -> multiprocessing.process.BaseProcess:
    """A forked process writing these pages from the data already loaded (inherited, never pickled): it needs
    nothing but the artifact files, so it runs while this process computes the lineage tables."""
    proc = multiprocessing.get_context("fork").Process(target=_write_pages, args=(ctx, rows, folder),
                                                       name="mkb-report-pages", daemon=True)
    proc.start()
    return proc


def _list_pages(ctx: PageContext, views: list[TableView], out: Path) -> dict[str, list[Optional[str]]]:
    """Write the list page of every row that aggregates trials; per view, each row's link from index.html."""
    folder = out / LISTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    links: dict[str, list[Optional[str]]] = {}
    for view in views:
        hrefs: list[Optional[str]] = []
        for i, members in enumerate(view.members):
            if members is None or members.empty:
                hrefs.append(None)
                continue
            name = f"{view.name}-{i}.html"
            _write(folder / name, list_page(ctx, members))
            hrefs.append(f"{LISTS_DIR}/{name}")
        links[view.name] = hrefs
    return links


def _calibration(store: RunStore, meta: dict, pairs: PairTable,
                 annotated: Optional[Mapping[str, frozenset[str]]], options: ReportOptions) -> Optional[Calibration]:
    """Planted vs recovered (analysis.calibration) for a synthetic run whose verdicts were drawn; None for any
    other run. The simultaneous intervals sit far out in the tails, so at least 4000 resamples (0: none)."""
    from ..calibration import calibration_table, run_spec, truth_categories

    spec = run_spec(meta)
    if spec is None:
        return None
    if not len(pairs):
        return Calibration(problem="no resolved benchmark cell-replicate to recover the planted rates from")
    n_boot = max(options.n_boot, 4000) if options.n_boot > 0 else 0
    truth = truth_categories(store, sorted(source_skill_shas(pairs.replicates)))
    try:
        frame = calibration_table(pairs, spec, truth, annotated, n_boot=n_boot)
    except ValueError as error:
        return Calibration(problem=str(error))
    return Calibration(view=calibration_view(frame, n_boot))


def render_report(run_dir: Path, out_dir: Path, options: ReportOptions = ReportOptions()) -> ReportSummary:
    """Read `run_dir`'s store and write the report under `out_dir` (see the module docstring)."""
    out = Path(out_dir)
    seconds: dict[str, float] = {}
    began = clock = time.monotonic()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.monotonic()
        seconds[stage] = now - clock
        clock = now

    with RunStore(Path(run_dir), readonly=True) as store:
        meta = store.meta()
        trials = load_trials(store)
        results = result_rows(store)
        replicates = cell_replicates(results)
        lap("load")
        pairs = score_pairs(replicates, options.rules)       # every pair's outcome and standing, once
        bench = benchmark_views(replicates, pairs, options.n_boot)
        chains = chain_view(results, options.rules, options.n_boot)
        chain_kinds = chain_kinds_view(results, options.rules, options.n_boot)
        lap("benchmark_tables")
        claims = load_claims(store, trials, options.annotator, options.taxonomy, options.matcher)
        from ..lineage_plots import category_colours

        header = run_header(meta, trials)
        hops = chain_hops_of(trials) if options.trial_pages else []
        ctx = PageContext(trials, claims, category_colours(claims.categories), store.artifacts, header.synthetic,
                          options.rules, {(p.cr.cell_key, p.cr.replicate): p for p in pairs},
                          {(p.cr.cell_key, p.cr.replicate): pair_name(p) for p in pairs} if options.trial_pages
                          else {},
                          {trials.hop_trial[c, h]: hop_name(c, h) for c, h in hops})
        lap("claims")
        out.mkdir(parents=True, exist_ok=True)
        folder = out / TRIALS_DIR
        folder.mkdir(exist_ok=True)
        rows = trials.rows if options.trial_pages else []
        # With lineage to compute, a second process writes every page meanwhile; without, it writes half of them.
        mine: Sequence[TrialRow] = rows
        helper = None
        if rows and _parallel(options.parallel_pages):
            theirs = rows if claims.matcher else rows[1::2]
            mine = [] if claims.matcher else rows[0::2]
            helper = _fork_pages(ctx, theirs, folder)
        try:
            enrichment = None
            categories_of: Optional[dict[str, frozenset[str]]] = None
            if claims.annotator and claims.taxonomy and replicates:
                categories_of = skill_categories(store, source_skill_shas(replicates), claims.annotator,
                                                 claims.taxonomy)
                if categories_of:
                    view = enrichment_view(pairs, categories_of, claims.categories, options.n_boot, claims.labels)
                    enrichment = view if not view.frame.is_empty() else None
            rule_causes = rule_causes_view(replicates, categories_of or {}, options.rules,
                                           claims.labels if categories_of else "(none: no annotations)")
            attribution = ([rule_causes] if not rule_causes.frame.is_empty() else []) + judge_views(Path(run_dir))
            calibration = _calibration(store, meta, pairs, categories_of or None, options) \
                if header.synthetic else None
            lap("calibration")
            causal = causal_view(store, results, options.rules, options.n_boot, header.synthetic)
            containment = containment_view(store, trials, header.synthetic, options.n_boot)
            lap("causal")
            lineage = lineage_section(store, claims, trials, out / "plots", options.lineage_n_boot, options.rules)
            lap("lineage")
            calibration_table = calibration.view if calibration is not None else None
            causal_table = causal.view if causal is not None else None
            views = bench + [v for v in (enrichment, *attribution, causal_table, containment, calibration_table, chains,
                                         chain_kinds,
                                         lineage.headline, lineage.corrected, lineage.gated) if v is not None]
            tables = write_tables(views, out, header.name, header.synthetic)
            lift_svg = problem_lift_svg(next(v for v in bench if v.name == "problem_lift").frame)
            links = _list_pages(ctx, views, out)
            lap("tables_and_lists")
            _write_pages(ctx, mine, folder)
            lap("trial_pages")
            if helper is not None:
                helper.join()
                if helper.exitcode != 0:
                    raise RuntimeError(f"the process writing trial pages failed (exit code {helper.exitcode})")
                helper = None
                lap("trial_pages_wait")
        finally:
            if helper is not None:
                helper.terminate()
                helper.join()
        _write(out / "trials.html", all_trials_page(ctx))
        if options.trial_pages:
            _write_paired_pages(ctx, pairs, hops, out)
            lap("paired_pages")
        index = out / "index.html"
        _write(index, index_page(header, bench, enrichment, chains, lineage, claims, lift_svg, links, len(trials.rows),
                                 len(replicates), calibration, attribution, causal, containment, chain_kinds))
        lap("index")
    seconds["total"] = time.monotonic() - began
    return ReportSummary(out, index, header.synthetic, len(trials.rows), len(rows),
                         sum(1 for hrefs in links.values() for h in hrefs if h), [p.name for p in tables], seconds)
