"""`render_report(run_dir, out_dir)`: read a run store once and write the static report.

    DIR/index.html            header, every table with links to the trials behind each row, plots
    DIR/trials.html           every trial of the run
    DIR/trials/<name>.html    one page per trial (transcript, submissions, kernel, highlighted SKILL.md)
    DIR/lists/<table>-<i>.html  the trials behind row i of a table
    DIR/tables/               <table>.csv, <table>.parquet, tables.md
    DIR/plots/                the lineage plots (PNG and SVG; the SVG is also inlined in index.html)

Failure attribution (analysis/report/attribution_views.py): the rule pass's causes per model and, when `mkb attribute`
stored LLM judgements, their agreement with the rules.

A synthetic run whose verdicts were drawn also gets "Planted vs recovered" (analysis/calibration.py): the rates its
spec plants beside what the analysis recovers.

Everything is read in a few batched queries first; the pages are then plain string templates. Only the store is
read (opened read-only: a campaign may still be writing it).
"""
from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from ...store import RunStore, TrialRow
from ..cells import cell_replicates, result_rows
from ..enrichment import skill_categories
from ..paired import PairingRules
from . import html as H
from .claims import ClaimData, load_claims
from .attribution_views import judge_views, rule_causes_view
from ..pairs import PairTable, score_pairs
from .pair_pages import (HOPS_DIR, PAIRS_DIR, PAIRS_INDEX, chain_hops_of, hop_name, hop_page, pair_name, pair_page,
                         pairs_index)
from .data import benchmark_views, calibration_view, chain_view, enrichment_view, source_skill_shas
from .lineage import LineageSection, lineage_section
from .pages import LISTS_DIR, PageContext, all_trials_page, list_page, trial_page
from .plots import inline_svg, problem_lift_svg
from .tables_out import write_tables
from .trials import TRIALS_DIR, TrialIndex, load_trials
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


def _header(meta: dict, trials: TrialIndex) -> H.RunHeader:
    try:
        config = json.loads(meta.get("config_json") or "{}")
    except ValueError:
        config = {}
    name = config.get("name") if isinstance(config, dict) else None
    synthetic = bool(meta.get("synthetic")) or any(r.synthetic for r in trials.rows)
    kinds = Counter(r.kind for r in trials.rows)
    statuses = Counter(r.status for r in trials.rows)
    counts = tuple(sorted(kinds.items())) + tuple(sorted(statuses.items()))
    return H.RunHeader(name=str(name or "unnamed run"), config_hash=meta.get("config_hash"),
                       targets=tuple(sorted({r.target for r in trials.rows})), synthetic=synthetic,
                       created_at=meta.get("created_at"), counts=counts)


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
    for chain, hop in hops:
        _write(out / HOPS_DIR / hop_name(chain, hop), hop_page(ctx, chain, hop))
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


def _closure_harm_block(result: Optional[dict]) -> str:
    """Does the share of closures a hop received predict harm there? (analysis.chains.closure_harm)"""
    if not result or not result.get("n_hops"):
        return ""

    def f(key: str) -> str:
        value = result.get(key)
        return "–" if value is None else f"{value:.3f}"
    slope = f("slope") + (f" [{f('slope_lo')}, {f('slope_hi')}]" if result.get("slope_lo") is not None else "")
    return (f"<h3>Closures received vs harm</h3><p>Over {int(result['n_hops'])} chain hops "
            f"({int(result['n_chains'])} chains): harm rate {f('harm_rate_none')} at hops whose received SKILL.md "
            f"held no unsupported closure, {f('harm_rate_some')} at hops whose did; slope of harm on the received "
            f"closure share {slope} (linear probability, bootstrap over chains; docs/metrics.md).</p>")


@dataclass(frozen=True)
class Calibration:
    """The planted-vs-recovered section of a synthetic run: its table, or why there is none (`problem`)."""

    view: Optional[TableView] = None
    problem: Optional[str] = None


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


def _calibration_block(calibration: Calibration, block: Callable[[TableView], str]) -> str:
    if calibration.view is None:
        return H.none(f"none: {calibration.problem}")
    return ("<p>What the synthetic generator planted (derived from the run's spec alone) beside what the analysis "
            "recovers from the run's records. The closure enrichment is checked on the generator's own claim "
            "labels; the annotator's rows, where mkb lineage has run, show what annotation errors do to it."
            "</p>" + block(calibration.view))


def _index(header: H.RunHeader, bench: list[TableView], enrichment: Optional[TableView],
           chains: Optional[TableView], lineage: LineageSection,
           claims: ClaimData, lift_svg: Optional[str], links: dict[str, list[Optional[str]]], n_trials: int,
           n_replicates: int, calibration: Optional[Calibration] = None,
           attribution: Sequence[TableView] = ()) -> str:
    def block(view: TableView) -> str:
        return H.view_block(view, links.get(view.name, []))

    no_bench = H.none("none: no resolved cell-replicate (its source, base and skill attempts must all have run "
                      "without an error)" if n_replicates else
                      "none: this run holds no benchmark cell-replicates (chain trials only, or nothing run yet)")
    by = {v.name: v for v in bench}
    paired = (block(by["paired_by_model_direction"]) + block(by["paired_overall"])
              if not by["paired_overall"].frame.is_empty() else no_bench)
    sections = [
        ("paired", "Paired outcomes (T, H, ΔGM)", paired),
        ("ladder", "MKB ladder", block(by["ladder"]) if not by["ladder"].frame.is_empty() else no_bench),
        ("standing", "Relative standing", block(by["standing"]) if not by["standing"].frame.is_empty() else no_bench),
        ("reverse", "Reverse-direction coupling", block(by["reverse"]) if not by["reverse"].frame.is_empty()
         else H.none("none: no helped cell-replicate with a resolved reverse") if n_replicates else no_bench),
        ("lift", "Per-problem lift", (H.plot(lift_svg, "ΔGM per problem") + block(by["problem_lift"]))
         if not by["problem_lift"].frame.is_empty() else no_bench),
        ("enrichment", "Category enrichment", block(enrichment) if enrichment is not None else no_bench
         if not n_replicates else H.none(
            "none: no helped or harmed cell-replicate has an annotated source SKILL.md"
            if claims.annotator else "none: the store holds no claim annotations (run `mkb lineage` first)")),
    ]
    if attribution:
        sections.append(("attribution", "Why skills harmed (failure attribution)",
                         "".join(block(v) for v in attribution)))
    else:
        sections.append(("attribution", "Why skills harmed (failure attribution)",
                         H.none("none: no harmed cell-replicate") if n_replicates else no_bench))
    if calibration is not None:
        sections.append(("calibration", "Planted vs recovered (SYNTHETIC)", _calibration_block(calibration, block)))
    sections.append(("chains", "Chains: help and harm per hop", block(chains) if chains is not None
                     else H.none("none: this run holds no chain hops")))
    if lineage.headline is not None:
        content = (block(lineage.headline) + (block(lineage.corrected) if lineage.corrected is not None else "")
                   + _closure_harm_block(lineage.closure_harm)
                   + "<h3>Survival</h3>" + H.plot(inline_svg(lineage.survival_svg), "survival plot")
                   + "<h3>Prevalence per hop</h3>" + H.plot(inline_svg(lineage.prevalence_svg), "prevalence plot"))
    elif lineage.problem:
        content = H.none(f"none: the stored lineage could not be read ({lineage.problem}); rerun `mkb lineage`")
    else:
        content = H.none("none: the store holds no lineage edges (chains not matched yet: `mkb lineage`)")
    sections.append(("lineage", "Claim propagation along chains", content))
    sections.append(("trials", "Trials", f'<p><a href="trials.html">All {n_trials} trials of the run</a>, each '
                                         f'with its own page under {TRIALS_DIR}/; <a href="{PAIRS_INDEX}">paired '
                                         'views</a>: each cell-replicate\'s base and skill-conditioned attempts side '
                                         'by side with the SKILL.md handed over, and each chain hop beside the one '
                                         'before. Every table as Markdown: '
                                         f'<a href="tables/tables.md">tables/tables.md</a>.</p>'))
    body = [H.header_block(header), H.contents([(a, t) for a, t, _ in sections])]
    body += [H.section(a, t, c) for a, t, c in sections]
    return H.page(f"report: {header.name}", "\n".join(body), header.synthetic)


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
        lap("benchmark_tables")
        claims = load_claims(store, trials, options.annotator, options.taxonomy, options.matcher)
        from ..lineage_plots import category_colours

        header = _header(meta, trials)
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
            lineage = lineage_section(store, claims, trials, out / "plots", options.lineage_n_boot, options.rules)
            lap("lineage")
            calibration_table = calibration.view if calibration is not None else None
            views = bench + [v for v in (enrichment, *attribution, calibration_table, chains, lineage.headline,
                                         lineage.corrected) if v is not None]
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
        _write(index, _index(header, bench, enrichment, chains, lineage, claims, lift_svg, links, len(trials.rows),
                            len(replicates), calibration, attribution))
        lap("index")
    seconds["total"] = time.monotonic() - began
    return ReportSummary(out, index, header.synthetic, len(trials.rows), len(rows),
                         sum(1 for hrefs in links.values() for h in hrefs if h), [p.name for p in tables], seconds)
