"""`mkb problems list` and `mkb problems validate`: the suite, and every shipped solution through the judge."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Optional

from ._common import UsageError, add_judging_options, add_problems_root, judging_from_args, load_problem_set

HELP = "list or validate the problem suite"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="problems_command", required=True, metavar="SUBCOMMAND")
    listing = commands.add_parser("list", help="list problems with family, arch and solutions per DSL")
    add_problems_root(listing)
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(handler=run_list)

    check = commands.add_parser(
        "validate", help="run every shipped solution through the judge, plus each problem's validity screens",
        description="Exit 0 when every screen holds and every solution passes (compile_only for GPU solutions "
                    "on a machine without a GPU), 1 otherwise.")
    check.add_argument("--dsl", nargs="+", choices=["cutedsl", "tirx"], default=["cutedsl", "tirx"])
    check.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    check.add_argument("--problem", nargs="+", metavar="ID", help="only these problem ids")
    add_problems_root(check)
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.add_argument("--target", nargs="+", choices=["gpu", "cpu"], default=["gpu", "cpu"],
                       help="which solutions: the GPU ones (cutedsl, tirx), the CPU-target TIRx one (tirx_cpu)")
    check.add_argument("--jobs", type=int, default=1, metavar="N",
                       help="validate N problems at once. On one GPU they share it for compiles and correctness but "
                            "each times alone on the device (a device lock); the host is still shared, so "
                            "launch-bound timings move, and CPU-target timings share the cores: record speedups "
                            "you will quote with the default 1. A problem that runs out of device memory beside "
                            "another job is validated again alone afterwards (its rows say so)")
    check.add_argument("--report", type=Path, metavar="FILE",
                       help="also write the full JSON report (every verdict) to this file, after every row")
    check.add_argument("--resume", action="store_true",
                       help="with --report: keep the rows of problems the existing report already covers and "
                            "validate only the others (a run cut short goes on where it stopped)")
    check.add_argument("--rerun-failed", action="store_true",
                       help="with --resume: also validate again the problems with a failed row (say, after a fix "
                            "or an out-of-memory run)")
    add_judging_options(check)
    check.set_defaults(handler=run_validate)

    readme = commands.add_parser(
        "readme", help="write problems/README.md: the table of every problem, from sidecars and recorded validations",
        description="Generate the suite's table (task, inputs, shapes, FLOPs/bytes, H200 speed-of-light, eager time, "
                    "solution speedups) from the problem files, their sidecars and the validation records under "
                    "benchmarks/results/ (`mkb problems validate --report FILE` JSON or a validate run's text). "
                    "--check: exit 1 when the file differs from what would be written.")
    add_problems_root(readme)
    readme.add_argument("--records", type=Path, nargs="+", metavar="FILE",
                        help="validation records, oldest first (default: benchmarks/results/*validate*)")
    readme.add_argument("--output", type=Path, metavar="FILE", help="default: README.md in the problems root")
    readme.add_argument("--check", action="store_true", help="compare instead of writing")
    readme.set_defaults(handler=run_readme)


def run_list(args: argparse.Namespace) -> int:
    problems = load_problem_set(args.problems_root)
    if args.json:
        print(json.dumps({
            "root": str(problems.root),
            "problems": [{"id": p.problem_id, "family": p.family, "min_arch": p.min_arch,
                          "min_arch_source": p.min_arch_source, "make_inputs_pins_cuda_at": p.cuda_pins,
                          "description": p.description, "solutions": sorted(p.solutions)} for p in problems.problems],
            "errors": [e.model_dump() for e in problems.errors]}, indent=2))
        return 0
    from rich.table import Table

    from ._console import make_console

    table = Table(title=f"{len(problems.problems)} problems under {problems.root}")
    for column in ("problem", "family", "arch", "cutedsl", "tirx", "tirx_cpu", "task"):
        table.add_column(column, no_wrap=column != "task", overflow="ellipsis")
    for p in problems.problems:
        marks = ["✓" if v in p.solutions else "-" for v in ("cutedsl", "tirx", "tirx_cpu")]
        table.add_row(p.problem_id, p.family, p.min_arch + ("*" if p.min_arch_inferred else ""), *marks,
                      p.description[:70])
    console = make_console()
    console.print(table)
    for p in problems.problems:
        if p.min_arch_inferred:
            console.print(f"* {p.problem_id}: min_arch {p.min_arch} {p.min_arch_source} (no sidecar says otherwise)")
        if p.cuda_pins:
            console.print(f"[yellow]GPU only[/yellow] {p.problem_id}: make_inputs() pins tensors to CUDA "
                          f"(line {', '.join(map(str, p.cuda_pins))}); it cannot be judged on a machine without a GPU")
    for error in problems.errors:
        console.print(f"[red]malformed problem[/red] {error.path}: {error.message}")
    return 0


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def run_validate(args: argparse.Namespace) -> int:
    from rich.table import Table

    from ..judge.validate import finished_problems, validate, wanted_variants
    from ._console import make_console

    problems = load_problem_set(args.problems_root)
    console = make_console()
    if args.resume and not args.report:
        raise UsageError("--resume needs --report FILE: the report it goes on from")
    if args.rerun_failed and not args.resume:
        raise UsageError("--rerun-failed goes with --resume")
    kept = _resumed_rows(args.report) if args.resume else []
    finished = finished_problems(kept, wanted_variants(args.dsl, args.target))
    if args.rerun_failed:
        finished -= {row.problem_id for row in kept if not row.ok}
    kept = [row for row in kept if row.problem_id in finished]
    only = [p.problem_id for p in problems.problems
            if (not args.problem or p.problem_id in args.problem) and p.problem_id not in finished]
    total = len(only)
    done: list = list(kept)

    def progress(row) -> None:
        # A row judged again (a problem validated alone after running out of device memory) replaces the first.
        done[:] = [r for r in done if (r.problem_id, r.variant) != (row.problem_id, row.variant)]
        done.append(row)
        if args.report:  # rewritten after every row: a run cut short keeps every verdict it reached
            _write_report(args.report, done, finished=False)
        if not args.json:
            mark = "[green]ok[/green]" if row.ok else "[red]FAIL[/red]"
            console.print(f"{mark} {row.problem_id} {row.variant}: {row.summary[:160]}")

    if not args.json:
        resumed = f" ({len(finished)} already in {args.report})" if finished else ""
        console.print(f"validating {total} problems on {args.device}{resumed} ...")
    limits, options = judging_from_args(args)
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    rows = kept + (validate(problems, args.device, dsls=args.dsl, limits=limits, options=options, on_row=progress,
                            only=only, jobs=args.jobs, targets=args.target) if only else [])
    failed = [r for r in rows if not r.ok]
    report = _write_report(args.report, rows, finished=True)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0 if not failed else 1
    table = Table(title=f"validation on {args.device}: {len(rows) - len(failed)}/{len(rows)} ok")
    for column in ("problem", "dsl", "verdict", "kernel_ms", "eager_ms", "compile_ms", "speedup", "ok"):
        table.add_column(column)
    for row in rows:
        v = row.verdict
        table.add_row(row.problem_id, row.variant, v.tier if v else ("screens" if row.variant == "screens" else "-"),
                      ms(v.kernel_ms if v else None), ms(v.eager_ms if v else None),
                      ms(v.torch_compile_ms if v else None),
                      f"{v.speedup:.2f}x" if v and v.speedup else "-", "✓" if row.ok else "✗")
    console.print(table)
    return 0 if not failed else 1


def _resumed_rows(path: Path) -> list:
    """The rows of an earlier report at `path` (none when there is no such file yet)."""
    from ..judge.validate import ValidationRow

    if not path.exists():
        return []
    try:
        return [ValidationRow.from_json(row) for row in json.loads(path.read_text())["rows"]]
    except (ValueError, KeyError, TypeError) as err:
        raise UsageError(f"--resume: {path} is not a validate report ({type(err).__name__}: {err})") from err


def _write_report(path: Optional[Path], rows: list, finished: bool) -> dict:
    """The JSON report of `rows` (written to `path` when given, atomically); `complete` is false until the run
    ended, so a report of a run that was cut short says so."""
    report = {"ok": all(r.ok for r in rows), "complete": finished, "rows": [r.as_json() for r in rows]}
    if path is not None:
        partial = path.with_name(path.name + ".partial")
        partial.write_text(json.dumps(report, indent=2))
        partial.replace(path)
    return report


def run_readme(args: argparse.Namespace) -> int:
    import sys

    from ..problem_table import default_records, render
    from ..problems import default_root

    problems = load_problem_set(args.problems_root)
    records = args.records if args.records is not None else default_records(default_root().parent)
    text = render(problems, records, "mkb problems readme")
    output = args.output or problems.root / "README.md"
    if args.check:
        current = output.read_text() if output.exists() else ""
        if current != text:
            print(f"{output} is not what `mkb problems readme` writes: run it and commit the result", file=sys.stderr)
            return 1
        print(f"{output} is current ({len(problems.problems)} problems)")
        return 0
    output.write_text(text)
    print(f"wrote {output} ({len(problems.problems)} problems, {len(records)} records)")
    return 0
