"""The `mkb` command line. Heavy imports (torch, DSLs, Ray) stay out of `--help` and out of this process where
they can: judging happens in subprocesses."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional, Sequence

from .console import make_console

EXAMPLES = """examples:
  mkb problems list                                   # the shipped suite, with solutions per DSL
  mkb problems validate --device cpu                  # judge every shipped solution on this machine
  mkb eval mlp_norm/01_fused_add_rmsnorm my_kernel.py --dsl tirx --device cpu
  mkb eval attention/01_gqa_paged_decode k.py --dsl cutedsl --device cuda --json
  mkb serve smollm2                                   # the embedded default model on 127.0.0.1:8000
  mkb attempt mlp_norm/01_fused_add_rmsnorm --dsl tirx --model smollm2 --out runs/a1
  mkb attempt mlp_norm/01_fused_add_rmsnorm --dsl cutedsl --model glm-5.3 --skill runs/a1/SKILL.md --out runs/a2
  mkb plan experiments/chain-100.yaml                 # trial counts, dependencies, GPU-hour estimate
  mkb run experiments/quickstart.yaml                 # the embedded default campaign; rerun to resume
  mkb export runs/quickstart --parquet --results-json

devices: 'cuda' judges a GPU kernel on the GPU (compiled to PTX only, tier compile_only, where there is none);
'cpu' judges on this machine's CPU: CPU-target TIRx kernels (target="llvm") run for real, GPU kernels are
compiled to PTX only. Shapes: production on cuda, the problem's smoke preset on cpu (--preset overrides).
"""


class UsageError(Exception):
    """Bad usage or a missing file: one line on stderr, exit code 2."""


def _load(root: Optional[Path]):
    from .problems import load_problems

    try:
        return load_problems(root)
    except FileNotFoundError as err:
        raise UsageError(str(err)) from None


def cmd_problems_list(args: argparse.Namespace) -> int:
    problems = _load(args.problems_root)
    if args.json:
        print(json.dumps({
            "root": str(problems.root),
            "problems": [{"id": p.problem_id, "family": p.family, "min_arch": p.sidecar.min_arch,
                          "description": p.description, "solutions": sorted(p.solutions)} for p in problems.problems],
            "errors": [e.model_dump() for e in problems.errors]}, indent=2))
        return 0
    from rich.table import Table

    table = Table(title=f"{len(problems.problems)} problems under {problems.root}")
    for column in ("problem", "family", "arch", "cutedsl", "tirx", "tirx_cpu", "task"):
        table.add_column(column, no_wrap=column != "task", overflow="ellipsis")
    for p in problems.problems:
        marks = ["✓" if v in p.solutions else "-" for v in ("cutedsl", "tirx", "tirx_cpu")]
        table.add_row(p.problem_id, p.family, p.sidecar.min_arch, *marks, p.description[:70])
    console = make_console()
    console.print(table)
    for error in problems.errors:
        console.print(f"[red]malformed problem[/red] {error.path}: {error.message}")
    return 0


def _ms(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.4g}"


def cmd_problems_validate(args: argparse.Namespace) -> int:
    from rich.table import Table

    from .validate import validate

    problems = _load(args.problems_root)
    console = make_console()
    only = args.problem or None
    total = sum(1 for p in problems.problems if not only or p.problem_id in only)

    def progress(row) -> None:
        if not args.json:
            mark = "[green]ok[/green]" if row.ok else "[red]FAIL[/red]"
            console.print(f"{mark} {row.problem_id} {row.variant}: {row.summary[:160]}")

    console.print(f"validating {total} problems on {args.device} ...") if not args.json else None
    limits, options = _judging(args)
    rows = validate(problems, args.device, dsls=args.dsl, limits=limits, options=options, on_row=progress, only=only)
    failed = [r for r in rows if not r.ok]
    if args.report:
        args.report.write_text(json.dumps({"ok": not failed, "rows": [r.as_json() for r in rows]}, indent=2))
    if args.json:
        print(json.dumps({"ok": not failed, "rows": [r.as_json() for r in rows]}, indent=2))
        return 0 if not failed else 1
    table = Table(title=f"validation on {args.device}: {len(rows) - len(failed)}/{len(rows)} ok")
    for column in ("problem", "dsl", "verdict", "kernel_ms", "eager_ms", "compile_ms", "speedup", "ok"):
        table.add_column(column)
    for row in rows:
        v = row.verdict
        table.add_row(row.problem_id, row.variant, v.tier if v else ("screens" if row.variant == "screens" else "-"),
                      _ms(v.kernel_ms if v else None), _ms(v.eager_ms if v else None),
                      _ms(v.torch_compile_ms if v else None),
                      f"{v.speedup:.2f}x" if v and v.speedup else "-", "✓" if row.ok else "✗")
    console.print(table)
    return 0 if not failed else 1


def _resolve_problem(spec: str, root: Optional[Path]):
    """A problem id (family/NN_name) or a path to a problem file."""
    path = Path(spec)
    if path.suffix == ".py" and path.exists():
        problems = _load(path.resolve().parent.parent)
        spec = f"{path.resolve().parent.name}/{path.stem}"
    else:
        problems = _load(root)
    try:
        return problems.get(spec)
    except KeyError as err:
        raise UsageError(str(err.args[0])) from None


def cmd_eval(args: argparse.Namespace) -> int:
    from .judge import judge_kernel

    kernel = Path(args.kernel_file)
    if not kernel.is_file():
        raise UsageError(f"kernel file not found: {kernel}")
    problem = _resolve_problem(args.problem, args.problems_root)
    limits, options = _judging(args)
    verdict = judge_kernel(problem, kernel, args.dsl, args.device, preset=args.preset, seed=args.seed,
                           limits=limits, options=options)
    if args.json:
        print(verdict.model_dump_json(indent=2))
        return 0
    console = make_console()
    colour = {"pass2x": "green", "pass": "green", "compile_only": "yellow"}.get(verdict.tier, "red")
    console.print(f"[bold {colour}]{verdict.tier}[/] {problem.problem_id} ({args.dsl}, {verdict.device}, "
                  f"{verdict.preset} shapes, target {verdict.target or '-'})")
    console.print(f"reason: {verdict.reason}")
    console.print(f"compiled={verdict.compiled} executed={verdict.executed} correct={verdict.correct} "
                  f"kernel_ms={_ms(verdict.kernel_ms)} eager_ms={_ms(verdict.eager_ms)} "
                  f"torch.compile_ms={_ms(verdict.torch_compile_ms)} "
                  f"speedup={'-' if verdict.speedup is None else f'{verdict.speedup:.2f}x'}")
    console.print(f"device: {verdict.device_name or '-'}; timing: {verdict.timing_method or '-'}; "
                  f"wall {verdict.wall_s:.1f} s (compile {verdict.compile_s:.2f} s)")
    for check in verdict.checks:
        console.print(f"  {'✓' if check.passed else '✗'} {check.name}: {check.detail[:300]}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mkb", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES,
        description="mkb-ray: judge GPU kernels written in CuTe DSL or TIRx against MetaKernelBench-style problems.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    root_help = "a problems root in the MetaKernelBench layout (<family>/NN_name.py); default: the shipped suite"
    problems = commands.add_parser("problems", help="list or validate the problem suite")
    problem_commands = problems.add_subparsers(dest="problems_command", required=True, metavar="SUBCOMMAND")
    listing = problem_commands.add_parser("list", help="list problems with family, arch and solutions per DSL")
    listing.add_argument("--problems-root", type=Path, help=root_help)
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(handler=cmd_problems_list)

    check = problem_commands.add_parser(
        "validate", help="run every shipped solution through the judge, plus each problem's validity screens",
        description="Exit 0 when every screen holds and every solution passes (compile_only for GPU solutions "
                    "on a machine without a GPU), 1 otherwise.")
    check.add_argument("--dsl", nargs="+", choices=["cutedsl", "tirx"], default=["cutedsl", "tirx"])
    check.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    check.add_argument("--problem", nargs="+", metavar="ID", help="only these problem ids")
    check.add_argument("--problems-root", type=Path, help=root_help)
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.add_argument("--report", type=Path, help="also write the full JSON report (every verdict) to this file")
    _add_judging_options(check)
    check.set_defaults(handler=cmd_problems_validate)

    evaluate = commands.add_parser(
        "eval", help="judge one kernel file and print its verdict",
        description="Judge KERNEL_FILE (which defines solve(*inputs)) as a solution of PROBLEM. Exit 0 whenever a "
                    "verdict was produced, also for a failing kernel; 2 for bad usage or a missing file.")
    evaluate.add_argument("problem", metavar="PROBLEM", help="problem id (e.g. mlp_norm/01_fused_add_rmsnorm) or path")
    evaluate.add_argument("kernel_file", metavar="KERNEL_FILE")
    evaluate.add_argument("--dsl", choices=["cutedsl", "tirx"], required=True, help="the DSL the kernel is written in")
    evaluate.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    evaluate.add_argument("--preset", choices=["production", "smoke"], help="shape preset (default: by device)")
    evaluate.add_argument("--seed", type=int, help="base seed of the draws (default: fresh)")
    evaluate.add_argument("--problems-root", type=Path, help=root_help)
    evaluate.add_argument("--json", action="store_true", help="print the verdict as JSON")
    _add_judging_options(evaluate)
    evaluate.set_defaults(handler=cmd_eval)

    serve = commands.add_parser(
        "serve", help="serve a roster model on 127.0.0.1 in the foreground (Ctrl-C stops it)",
        description="Start the roster model's OpenAI-compatible endpoint (vLLM; Ray Serve LLM by default, on the CPU "
                    "backend where there is no GPU) and print it. `mkb serve smollm2` serves the embedded default.")
    serve.add_argument("model", metavar="MODEL", help="roster name (experiments/models/<name>.yaml), e.g. smollm2")
    serve.add_argument("--roster-dir", type=Path, help="a folder of roster YAMLs (default: experiments/models)")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--backend", choices=["auto", "ray_serve_llm", "vllm_subprocess"], default="auto")
    serve.set_defaults(handler=cmd_serve)

    attempt = commands.add_parser(
        "attempt", help="run one agent attempt (solo, or conditioned on a SKILL.md) and write its record",
        description="A model reads the problem, writes kernels, gets verdicts back, keeps a SKILL.md and ends with a "
                    "final kernel judged once more. Exit 0 when the record says completed or skipped.")
    from .attempt_cli import add_attempt_arguments

    add_attempt_arguments(attempt)
    attempt.set_defaults(handler=cmd_attempt)

    from .campaign.plan_cli import add_plan_arguments
    from .campaign.run_cli import add_run_arguments
    from .store.export_cli import add_export_arguments

    plan = commands.add_parser(
        "plan", help="expand an experiment YAML into trials: counts, dependencies, a GPU-hour estimate",
        description="Print what `mkb run CONFIG` would run: trials per model, kind and arm, the longest dependency "
                    "chain, where each DSL's kernels are judged on this machine, and an estimate with its "
                    "assumptions. Exit 2 for a config that does not load (the message names file and field).")
    add_plan_arguments(plan)
    plan.set_defaults(handler=_lazy("campaign.plan_cli", "plan_from_args"))

    run = commands.add_parser(
        "run", help="run a campaign (benchmark arms and/or chains) on Ray; rerun to resume",
        description="Plan CONFIG, sync it with the run's store (runs/<name>/store.sqlite), start model servers and "
                    "evaluators, run every trial not yet stored, print a summary. Kill it or Ctrl-C it at any "
                    "time: the same command resumes without repeating or losing a trial.")
    add_run_arguments(run)
    run.set_defaults(handler=_lazy("campaign.run_cli", "run_from_args"))

    export = commands.add_parser(
        "export", help="export a run's store as parquet tables and per-model results.json",
        description="Write RUN's store as polars-readable parquet tables and MetaKernelBench-style results.json "
                    "files (synthetic rows are labelled).")
    add_export_arguments(export)
    export.set_defaults(handler=_lazy("store.export_cli", "export_from_args"))
    return parser


def _lazy(module: str, function: str):
    """A handler imported only when its command runs (keeps `mkb --help` fast)."""
    def handler(args: argparse.Namespace) -> int:
        import importlib

        return getattr(importlib.import_module(f"mkb_ray.{module}"), function)(args)
    return handler


def cmd_serve(args: argparse.Namespace) -> int:
    from .serve_cli import serve_main

    return serve_main(args.model, roster_dir=args.roster_dir, port=args.port, backend=args.backend)


def cmd_attempt(args: argparse.Namespace) -> int:
    from .attempt_cli import attempt_from_args

    return attempt_from_args(args)


def _add_judging_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--timeout-s", type=float, default=600.0, help="hard limit per judgement (default 600)")
    parser.add_argument("--warmup", type=int, default=10, help="warm-up draws before timing (default 10)")
    parser.add_argument("--timed", type=int, default=50, help="timed draws (default 50)")
    parser.add_argument("--no-compile-baseline", dest="compile_baseline", action="store_false", default=None,
                        help="skip timing torch.compile of the reference (on by default on GPUs; inductor's first "
                             "compile costs 10-60 s per judgement)")


def _judging(args: argparse.Namespace):
    """The JudgeLimits and JudgeOptions that `_add_judging_options` collected."""
    from .judge import JudgeOptions
    from .worker_process import JudgeLimits

    return (JudgeLimits(timeout_s=args.timeout_s),
            JudgeOptions(warmup=args.warmup, timed=args.timed, compile_baseline=args.compile_baseline))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except UsageError as err:
        print(f"mkb: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
