"""`mkb lineage RUN`: cut every SKILL.md of a run into claims, annotate them, match each chain hop to the one
before, store it all (tables claims, annotations, lineage_edges), then print the headline table and write the
tables, GraphML and plots. Exit codes: 0 done, 2 bad arguments or no run store, 3 the store is being written by
another process (a campaign still running: rerun when it is done; `mkb lineage` is incremental).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ._common import store_missing

HELP = "claims, annotations and claim lineage of a run's chains, with the propagation headline table and plots"
DESCRIPTION = """Segment every stored SKILL.md of RUN into atomic claims, annotate each (category from the taxonomy,
modality hedged/plain/absolute, support read from the attempt's own verdicts), match the claims of every chain hop
to its source hop, and store the result in RUN's store. Incremental: a rerun does only new SKILL.md files and new
hops. Then prints, per category: prevalence at hops 1/10/100, lineage survival, reinforcement vs dilution, and the
attractor (fixed point, strength), then the annotator's measured error on the hand-labelled test split and each
category's prevalence, and the closure category's survival and reinforced share, corrected for it (with intervals);
and writes under --out (default RUN/lineage): headline.csv, prevalence_corrected.csv, lineage_corrected.csv,
nodes.parquet, edges.parquet, one GraphML file per chain (graphml/), survival.png/.svg, prevalence.png/.svg and the
lineage graph of one chain (chain.png/.svg; --chain picks it).

examples:
  mkb lineage runs/quickstart                      # offline annotator (rules + local MiniLM)
  mkb lineage runs/chain-100 --chain glm-5.3/moe/01_topk_softmax_renorm/chain0
  mkb lineage runs/chain-10 --annotator glm-5.3 --api-base http://127.0.0.1:8000/v1
  mkb lineage runs/quickstart --taxonomy my-taxonomy    # experiments/taxonomies/my-taxonomy.yaml (or a path)
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("run", type=Path, metavar="RUN", help="the run directory (holds store.sqlite)")
    parser.add_argument("--chain", metavar="ID", help="only this chain: '<model>/<problem>/chain<c>' or a unique "
                                                      "suffix of it")
    parser.add_argument("--annotator", default="offline", metavar="offline|learned|MODEL",
                        help="'offline' (rules + MiniLM, default), 'learned' (a classifier over the same signals, "
                             "fitted to the dev gold split) or a roster model name for the LLM annotator")
    parser.add_argument("--api-base", metavar="URL", help="the LLM annotator's endpoint (a served roster model)")
    parser.add_argument("--taxonomy", default="mkb-11", metavar="NAME|PATH",
                        help="the claim taxonomy (default mkb-11: experiments/taxonomies/mkb-11.yaml)")
    parser.add_argument("--threshold", type=float, default=None, metavar="COS",
                        help="the matcher's similarity threshold (default: the one calibrated on the gold set)")
    parser.add_argument("--out", type=Path, metavar="DIR", help="where tables and plots go (default RUN/lineage)")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG/SVG plots")
    parser.add_argument("--json", action="store_true", help="print the summary and headline table as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..claims.taxonomy import TaxonomyError, load_taxonomy
    from ..lineage.match import DEFAULT_THRESHOLD
    from ..store.sqlite_store import StoreError, StoreLocked

    if store_missing(args.run, "lineage"):
        return 2
    try:
        taxonomy = load_taxonomy(args.taxonomy)
    except TaxonomyError as error:
        print(f"mkb lineage: --taxonomy: {error}", file=sys.stderr)
        return 2
    threshold = DEFAULT_THRESHOLD if args.threshold is None else args.threshold
    if not -1.0 <= threshold <= 1.0:
        print(f"mkb lineage: --threshold must be a cosine similarity in [-1, 1], got {threshold}", file=sys.stderr)
        return 2
    from ..store import RunStore

    try:
        store = RunStore(args.run)
    except StoreLocked as error:
        print(f"mkb lineage: {error}", file=sys.stderr)
        return 3
    except StoreError as error:
        print(f"mkb lineage: {error}", file=sys.stderr)
        return 2
    with store:
        try:
            return _run(args, store, taxonomy, threshold)
        except ValueError as error:   # an unknown --chain, a bad roster name, a bad learned-annotator weights file
            print(f"mkb lineage: {error}", file=sys.stderr)
            return 2


def _run(args: argparse.Namespace, store, taxonomy, threshold: float) -> int:  # type: ignore[no-untyped-def]
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..lineage.pipeline import LineagePipeline
    from ._console import make_console

    console = make_console()
    from ..claims.annotators import make_annotator

    # A bad weights file (LearnedWeightsError) is a ValueError: `run` prints it and exits 2.
    annotator = make_annotator(args.annotator, taxonomy, args.api_base)
    with Progress(TextColumn("{task.description:>9}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=args.json, transient=False) as bar:
        tasks: dict[str, int] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=max(total, 1))
            bar.update(tasks[stage], completed=done, total=max(total, 1))

        summary = LineagePipeline(store, annotator, taxonomy, threshold=threshold, progress=progress).run(args.chain)
    # The pipeline resolved --chain (an id or a unique suffix) to the one chain it matched.
    only = next(iter(summary.chains)) if args.chain else None
    out: Path = args.out if args.out is not None else args.run / "lineage"
    report = _write_outputs(store, summary, taxonomy, out, only, plots=not args.no_plots)
    if args.json:
        print(json.dumps({"summary": summary.__dict__, **report}, indent=2, default=str))
        return 0
    _print(console, summary, report)
    return 0


def _write_outputs(store, summary, taxonomy, out: Path, only, plots: bool) -> dict:  # type: ignore[no-untyped-def]
    from dataclasses import asdict

    import polars as pl

    from ..analysis.lineage_data import load_lineage
    from ..analysis.propagation import headline_table
    from ..lineage.graph import chain_graph, write_graphml

    every = load_lineage(store, summary.matcher, summary.annotator, summary.taxonomy, only)
    # The headline, plots and corrections describe the plain chains; gated twins are compared with them apart.
    data = every.plain()
    out.mkdir(parents=True, exist_ok=True)
    headline = headline_table(data.nodes, data.edges, categories=list(taxonomy.names))
    headline.write_csv(out / "headline.csv")
    written = [out / "headline.csv"]
    if every.nodes:
        pl.DataFrame([{**asdict(n), "text": every.texts.get(n.claim_id, "")} for n in every.nodes]
                     ).write_parquet(out / "nodes.parquet")
        written.append(out / "nodes.parquet")
    if every.edges:
        pl.DataFrame([e.model_dump() for e in every.edges]).write_parquet(out / "edges.parquet")
        written.append(out / "edges.parquet")
    for chain_id in sorted({n.chain_id for n in every.nodes}):
        graph = chain_graph(chain_id, every.nodes, every.edges, every.texts)
        written.append(write_graphml(graph, out / "graphml" / (chain_id.replace("/", "__") + ".graphml")))
    chains = sorted({n.chain_id for n in data.nodes})
    gated = None
    if any(v.startswith("gate-") for v in every.variants.values()):
        from ..analysis.gate_chains import gate_chain_table

        gated = gate_chain_table(every, every.variants, category=taxonomy.closure_category)
        gated.write_csv(out / "gated_chains.csv")
        written.append(out / "gated_chains.csv")
    if plots and data.nodes:
        from ..analysis.lineage_plots import plot_lineage_graph, plot_prevalence, plot_survival
        from ..analysis.propagation import prevalence, survival

        closure = taxonomy.closure_category
        written += plot_prevalence(prevalence(data.nodes, list(taxonomy.names), n_boot=200), out / "prevalence",
                                   categories=list(taxonomy.names))
        curves = survival(data.nodes, data.edges, closure, n_boot=200)
        if not curves.is_empty():
            written += plot_survival(curves, out / "survival", title=f"Survival of {closure} lineages")
        shown = only or chains[0]
        written += plot_lineage_graph(data.nodes, data.edges, shown, out / "chain", categories=list(taxonomy.names),
                                      focus_category=closure)
    from ..claims.annotator_error import recorded_error

    error = recorded_error(summary.annotator)
    corrected = lineage_corrected = None
    if error is not None and data.nodes:
        from ..analysis.annotator_correction import corrected_prevalence
        from ..analysis.lineage_correction import corrected_lineage_metrics

        corrected = corrected_prevalence(data.nodes, error, headline["category"].to_list(), n_boot=1000)
        corrected.write_csv(out / "prevalence_corrected.csv")
        lineage_corrected = corrected_lineage_metrics(data.nodes, data.edges, error, taxonomy.closure_category,
                                                      n_boot=1000)
        lineage_corrected.write_csv(out / "lineage_corrected.csv")
        written += [out / "prevalence_corrected.csv", out / "lineage_corrected.csv"]
    return {"headline": headline.to_dicts(), "written": [str(p) for p in written], "chains": len(chains),
            "annotator_error": error.as_json() if error else None,
            "prevalence_corrected": corrected.to_dicts() if corrected is not None else None,
            "lineage_corrected": lineage_corrected.to_dicts() if lineage_corrected is not None else None,
            "claims": len(data.nodes), "edges": len(data.edges),
            "gated_chains": gated.to_dicts() if gated is not None else None}


def _print(console, summary, report: dict) -> None:  # type: ignore[no-untyped-def]
    from rich.table import Table

    console.print(f"{len(summary.chains)} chain(s); {summary.skills_segmented} SKILL.md segmented now "
                  f"({summary.claims_new} new claims), {summary.claims_annotated} annotated now "
                  f"({summary.unannotated} unannotated), {summary.edges_new} new edges; "
                  f"annotator {summary.annotator}, taxonomy {summary.taxonomy}, matcher {summary.matcher}")
    rows = report["headline"]
    if not rows:
        console.print("no claims in this run's chains yet (no chain hop wrote a SKILL.md with claims)")
        return
    table = Table(title=f"claim propagation over {report['chains']} chain(s), {report['claims']} claims, "
                        f"{report['edges']} edges")
    columns = list(rows[0])
    for column in columns:
        table.add_column(column, justify="left" if column == "category" else "right")
    for row in rows:
        table.add_row(*[v if isinstance(v, str) else "-" if v is None else f"{v:.3f}" for v in row.values()])
    console.print(table)
    _print_annotator_error(console, summary.annotator, report.get("annotator_error"), [r["category"] for r in rows])
    _print_corrected(console, report.get("prevalence_corrected"))
    _print_lineage_corrected(console, report.get("lineage_corrected"))
    _print_gated(console, report.get("gated_chains"))
    console.print(f"wrote {len(report['written'])} files under {Path(report['written'][0]).parent}")


def _span(value, lo, hi) -> str:  # type: ignore[no-untyped-def]
    """A value with its interval, '-' for none."""
    if value is None:
        return "-"
    return f"{value:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else "")


def _print_lineage_corrected(console, rows) -> None:  # type: ignore[no-untyped-def]
    """The closure category's survival and reinforced share, raw and corrected for the label's purity
    (analysis/lineage_correction.py)."""
    if not rows:
        return
    from rich.table import Table

    table = Table(title=f"{rows[0]['category']} lineages ({rows[0]['n_lineages']} born): as labelled, and corrected "
                        f"for the share of them that are truly {rows[0]['category']} (purity, from the gold recall "
                        f"and false-positive rate; 95 % intervals that also redraw the gold counts; assumes "
                        f"mislabelled lineages fare like the other categories' in this run)")
    for column in ("metric", "as labelled", "purity", "corrected"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for r in rows:
        table.add_row(r["metric"], _span(r["raw"], r["raw_lo"], r["raw_hi"]),
                      "-" if r["purity"] is None else f"{r['purity']:.2f}",
                      _span(r["corrected"], r["corrected_lo"], r["corrected_hi"]))
    console.print(table)


def _print_corrected(console, rows) -> None:  # type: ignore[no-untyped-def]
    """Mean prevalence over all hops, raw and corrected for the annotator's test-split error (annotator_correction)."""
    if not rows:
        return
    from rich.table import Table

    table = Table(title="prevalence over all hops: as labelled, and corrected for the annotator's measured recall and "
                        "false-positive rate (95 % intervals; the corrected one also redraws the gold counts; assumes "
                        "the run's text is labelled as well as the gold split's)")
    for column in ("category", "as labelled", "corrected", "gold recall / false-positive rate"):
        table.add_column(column, justify="left" if column == "category" else "right")
    for r in rows:
        rates = ("-" if r["sensitivity"] is None else
                 f"{r['sensitivity']:.2f} / {r['false_positive_rate']:.3f} ({r['gold']} gold)")
        table.add_row(r["category"], _span(r["raw"], r["raw_lo"], r["raw_hi"]),
                      _span(r["corrected"], r["corrected_lo"], r["corrected_hi"]) if r["gold"] else "no gold claims",
                      rates)
    console.print(table)


def _print_annotator_error(console, annotator: str, error, categories) -> None:  # type: ignore[no-untyped-def]
    """The annotator's measured error beside the headline: its rows are what it labelled, uncorrected."""
    if not error:
        console.print(f"annotator {annotator}: no recorded gold scores (mkb gold --annotator ... --split test "
                      f"--record); the table above is as it labelled, uncorrected")
        return
    console.print(f"the table above is as annotator {annotator} labelled the claims, uncorrected; on the "
                  f"hand-labelled {error['split']} split ({error['files']} SKILL.md, {error['claims']} claims; "
                  f"mkb gold) its category accuracy is {error['category_accuracy']:.2f} "
                  f"(κ {error['kappa_vs_gold']:.2f}):")
    for category in categories:
        score = error["per_category"].get(category)
        if score:
            console.print(f"  {category}: precision {score['precision']:.2f}, recall {score['recall']:.2f} "
                          f"({score['gold']} gold claims)")


def _print_gated(console, rows) -> None:  # type: ignore[no-untyped-def]
    """Gated against plain chains (analysis/gate_chains.py): closure survival and share, help and harm."""
    if not rows:
        return
    from rich.table import Table

    def cell(row: dict, name: str) -> str:
        value, lo, hi = row.get(name), row.get(f"{name}_lo"), row.get(f"{name}_hi")
        if value is None:
            return "-"
        return f"{value:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else "")

    table = Table(title="verification gate: gated chains against plain ones (the headline above is the plain ones)")
    names = ("survival_1", "survival_2", "closure_share_last", "help", "harm", "d_help", "d_harm")
    for column in ("gate", "chains", "hops", *names):
        table.add_column(column.replace("_", " "), justify="left" if column == "gate" else "right")
    for row in rows:
        table.add_row(row["gate"], str(row["chains"]), str(row["hops"]), *[cell(row, n) for n in names])
    console.print(table)
