"""`mkb problems list` and `mkb problems validate`: the suite, and every shipped solution through the judge."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

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
    check.add_argument("--jobs", type=int, default=1, metavar="N",
                       help="validate N problems at once (faster where compiles dominate; timings then share the "
                            "cores, so record speedups with the default 1)")
    check.add_argument("--report", type=Path, metavar="FILE",
                       help="also write the full JSON report (every verdict) to this file")
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

    from ..judge.validate import validate
    from ._console import make_console

    problems = load_problem_set(args.problems_root)
    console = make_console()
    only = args.problem or None
    total = sum(1 for p in problems.problems if not only or p.problem_id in only)

    def progress(row) -> None:
        if not args.json:
            mark = "[green]ok[/green]" if row.ok else "[red]FAIL[/red]"
            console.print(f"{mark} {row.problem_id} {row.variant}: {row.summary[:160]}")

    if not args.json:
        console.print(f"validating {total} problems on {args.device} ...")
    limits, options = judging_from_args(args)
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    rows = validate(problems, args.device, dsls=args.dsl, limits=limits, options=options, on_row=progress, only=only,
                    jobs=args.jobs)
    failed = [r for r in rows if not r.ok]
    report = {"ok": not failed, "rows": [r.as_json() for r in rows]}
    if args.report:
        args.report.write_text(json.dumps(report, indent=2))
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
