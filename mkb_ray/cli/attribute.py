"""`mkb attribute RUN --model NAME`: the LLM judge of failure attribution over a run's harmed cell-replicates, kept
in RUN/attribution/<judge>.jsonl, then its agreement with the rule pass. Exit codes: 0 done (cell-replicates the
judge could not answer are kept as unjudged, with the reason), 1 every judgement asked this time failed, 2 bad
arguments or no run store.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._common import store_missing

HELP = "failure attribution of harmed cell-replicates by an LLM judge, and its agreement with the rule pass"
DESCRIPTION = """For every harmed cell-replicate of RUN (the skill attempt did worse than the base attempt in the same
DSL), ask a roster model why: it reads both attempts' stop reasons, verdicts and transcripts (trimmed to its
context, the ends kept) and the source SKILL.md, and names one cause — measurement_noise, execution_error,
budget_exhaustion, search_truncation, dsl_mismatch_transfer, unverified_adoption or unattributed — with a short
quote as evidence (fixed prompt analysis/prompts/attribute-v1.md; reply validated, a malformed one asked again).
Judgements go to RUN/attribution/llm-<model>-v1.jsonl; a rerun skips the cell-replicates already judged (unjudged
ones are asked again) and refreshes the rule pass's causes. Prints the agreement with the rule pass: n, raw
agreement, Cohen's kappa and the confusion table. The run store is only read.

examples:
  mkb attribute runs/benchmark-6model --model glm-5.3                  # provider API (key from the environment)
  mkb attribute runs/quickstart --model smollm2 --api-base http://127.0.0.1:8000/v1 --max-cells 5
  mkb attribute runs/quickstart --model smollm2 --api-base http://127.0.0.1:8000/v1 --json-schema
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("run", type=Path, metavar="RUN", help="the run directory (holds store.sqlite)")
    parser.add_argument("--model", required=True, metavar="NAME", help="the judge: a roster model name")
    parser.add_argument("--api-base", metavar="URL", help="the judge's endpoint when it is one of our vLLM servers")
    parser.add_argument("--max-cells", type=int, metavar="N",
                        help="judge at most N cell-replicates this time (default: all not yet judged)")
    parser.add_argument("--concurrency", type=int, metavar="N",
                        help="cases judged at once (default: the roster model's max_concurrency)")
    parser.add_argument("--case-tokens", type=int, metavar="N",
                        help="most tokens one case may take (default 16000, lowered to fit the model's context)")
    parser.add_argument("--json-schema", action="store_true",
                        help="constrain the reply to its JSON schema (response_format; guided decoding on vLLM), "
                             "for small models such as smollm2 that give no valid reply unaided; the judge is then "
                             "named llm:<model>:v1+schema")
    parser.add_argument("--timeout-s", type=float, default=600.0, metavar="S",
                        help="limit per case, retries included (default 600)")
    parser.add_argument("--noise", type=float, default=None, metavar="FRACTION",
                        help="timing noise of the pairing (default: measured per target and kernel-time class, "
                             "as mkb report)")
    parser.add_argument("--annotator", metavar="NAME",
                        help="whose claim annotations the rule pass reads (default: as mkb report picks)")
    parser.add_argument("--taxonomy", metavar="NAME@VERSION", help="the taxonomy of those annotations")
    parser.add_argument("--json", action="store_true", help="print the summary and agreement tables as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..store.sqlite_store import StoreError

    if store_missing(args.run, "attribute"):
        return 2
    for name in ("max_cells", "concurrency", "case_tokens"):
        value = getattr(args, name)
        if value is not None and value < (500 if name == "case_tokens" else 1 if name == "concurrency" else 0):
            print(f"mkb attribute: --{name.replace('_', '-')} is too small: {value}", file=sys.stderr)
            return 2
    if args.noise is not None and args.noise < 0:
        print(f"mkb attribute: --noise must be ≥ 0, got {args.noise}", file=sys.stderr)
        return 2
    from ..analysis.attribution_judge import LLMAttributionJudge

    try:
        judge = LLMAttributionJudge(args.model, api_base=args.api_base, timeout_s=args.timeout_s,
                                    case_tokens=args.case_tokens, json_schema=args.json_schema)
    except (KeyError, ValueError) as error:   # not a roster name
        print(f"mkb attribute: --model: {error.args[0] if error.args else error}", file=sys.stderr)
        return 2
    from ..store import RunStore

    try:
        store = RunStore(args.run, readonly=True)
    except StoreError as error:
        print(f"mkb attribute: {error}", file=sys.stderr)
        return 2
    with store:
        return _run(args, store, judge)


def _run(args: argparse.Namespace, store, judge) -> int:  # type: ignore[no-untyped-def]
    import asyncio
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..analysis.attribution import attribute
    from ..analysis.attribution_case import harmed, load_case
    from ..analysis.attribution_judgements import (judgement_tables, judgements_json, judgements_path,
                                                   read_judgements, write_judgements)
    from ..analysis.cells import cell_replicates, result_rows
    from ..analysis.enrichment import skill_categories
    from ..analysis.paired import PairingRules
    from ..analysis.report.claims import stored_labels
    from ._console import make_console

    console = make_console()
    rules = PairingRules() if args.noise is None else PairingRules(noise=args.noise)
    cases = harmed(cell_replicates(result_rows(store)), rules)
    annotator, taxonomy = stored_labels(store, args.annotator, args.taxonomy)
    labels = f"{annotator}@{taxonomy}" if annotator and taxonomy else None
    shas = {cr.source.skill_sha for cr in cases if cr.source is not None and cr.source.skill_sha}
    categories_of = skill_categories(store, shas, annotator, taxonomy) if labels and shas else {}
    rule_cause = {}
    for cr in cases:
        sha = cr.source.skill_sha if cr.source is not None else None
        rule_cause[cr.cell_key + (cr.replicate,)] = attribute(cr, categories_of.get(sha) if sha else None, rules)

    path = judgements_path(args.run, judge.name)
    # Records of cell-replicates no longer harmed (another --noise, new trials) are kept, out of the comparison.
    kept = {r.key: r for r in read_judgements(path)}
    todo = [cr for cr in cases if getattr(kept.get(cr.cell_key + (cr.replicate,)), "status", None) != "judged"]
    if args.max_cells is not None:
        todo = todo[:args.max_cells]
    concurrency = args.concurrency or int(getattr(judge.client.spec, "max_concurrency", 4) or 4)
    if not args.json:
        before = sum(1 for k, r in kept.items() if r.status == "judged" and k in rule_cause)
        stale = sum(1 for k in kept if k not in rule_cause)
        console.print(f"{len(cases)} harmed cell-replicates, {before} judged before by {judge.name}; judging "
                      f"{len(todo)} now ({concurrency} at once; the rule pass reads annotations {labels or 'none'})"
                      + (f"; {stale} record(s) of cell-replicates no longer harmed kept, not compared" if stale
                         else ""))

    def refreshed():  # type: ignore[no-untyped-def]
        return [r.model_copy(update={"rule_cause": rule_cause.get(r.key), "rule_labels": labels})
                for r in kept.values()]

    new: list = []
    flushed = [time.monotonic()]

    async def judge_all(bar, task) -> None:  # type: ignore[no-untyped-def]
        gate = asyncio.Semaphore(concurrency)

        async def one(cr) -> None:  # type: ignore[no-untyped-def]
            async with gate:
                key = cr.cell_key + (cr.replicate,)
                record = await judge.ajudge(load_case(store, cr, rules, rule_cause[key]))
            kept[key] = record
            new.append(record)
            bar.advance(task)
            if time.monotonic() - flushed[0] >= 5.0:   # a killed run loses at most a few seconds of answers
                write_judgements(path, refreshed())
                flushed[0] = time.monotonic()

        await asyncio.gather(*(one(cr) for cr in todo))

    with Progress(TextColumn("{task.description:>8}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=args.json or not todo, transient=False) as bar:
        task = bar.add_task("judging", total=max(len(todo), 1))
        try:
            asyncio.run(judge_all(bar, task))
        finally:
            if kept or path.exists():
                write_judgements(path, refreshed())
    tables = judgement_tables(refreshed())
    failed = [r for r in new if r.status == "unjudged"]
    if args.json:
        import json

        print(json.dumps({"judge": judge.name, "file": str(path), "harmed": len(cases), "judged_now": len(new),
                          "unjudged_now": len(failed), **judgements_json(tables)}, indent=2))
    else:
        _print(console, judge.name, path, tables, failed)
    return 1 if new and len(failed) == len(new) else 0


def _print(console, judge: str, path: Path, tables, failed: list) -> None:  # type: ignore[no-untyped-def]
    from rich.table import Table

    if failed:
        console.print(f"[yellow]{len(failed)} cell-replicate(s) left unjudged this time[/yellow], e.g. "
                      f"{failed[0].problem_id} {failed[0].direction} r{failed[0].replicate}: {failed[0].reason}")
    if tables.summary.is_empty():
        console.print("no harmed cell-replicates in this run: nothing to attribute")
        return
    row = tables.summary.row(0, named=True)
    kappa = "-" if row["kappa"] is None else f"{row['kappa']:.3f}"
    share = "-" if row["agreement"] is None else f"{row['agreement']:.3f}"
    console.print(f"{judge} vs the rule pass over {row['n']} harmed cell-replicates ({row['n_unjudged']} "
                  f"unjudged): raw agreement {share}, Cohen's kappa {kappa}; records in {path}")
    confusion = tables.confusion
    if confusion.is_empty():
        return
    columns = [c for c in confusion.columns if c not in ("judge", "rule_cause", "n")]
    table = Table(title="rule cause (rows) × judge cause (columns)")
    table.add_column("rule \\ judge")
    for c in columns:
        table.add_column(c.replace("_", " "), justify="right")
    table.add_column("n", justify="right")
    for r in confusion.iter_rows(named=True):
        table.add_row(r["rule_cause"], *[str(r[c]) if r[c] else "." for c in columns], str(r["n"]))
    console.print(table)
