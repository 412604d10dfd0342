"""`mkb eval PROBLEM KERNEL_FILE --dsl D`: judge one kernel file and print its verdict."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Optional

from ._common import UsageError, add_judging_options, add_problems_root, judging_from_args, load_problem_set
from .problems import ms

HELP = "judge one kernel file and print its verdict"
DESCRIPTION = ("Judge KERNEL_FILE (which defines solve(*inputs)) as a solution of PROBLEM. Exit 0 whenever a verdict "
               "was produced, also for a failing kernel; 2 for bad usage or a missing file.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("problem", metavar="PROBLEM", help="problem id (e.g. mlp_norm/01_fused_add_rmsnorm) or path")
    parser.add_argument("kernel_file", metavar="KERNEL_FILE")
    parser.add_argument("--dsl", choices=["cutedsl", "tirx"], required=True, help="the DSL the kernel is written in")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--preset", choices=["production", "smoke"], help="shape preset (default: by device)")
    parser.add_argument("--seed", type=int, help="base seed of the draws (default: fresh)")
    add_problems_root(parser)
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    parser.add_argument("--baselines", type=Path, default=None, metavar="DIR",
                        help="cache the eager/torch.compile baselines here, so that judging the same problem again "
                             "skips measuring them (default: ~/.cache/mkb-ray/baselines; MKB_CACHE_DIR moves it)")
    parser.add_argument("--fresh-baselines", action="store_true",
                        help="measure the baselines for this judgement, ignoring (and not filling) the cache")
    add_judging_options(parser)
    parser.set_defaults(handler=run)


def resolve_problem(spec: str, root: Optional[Path]) -> Any:
    """A problem id (family/NN_name) or a path to a problem file."""
    path = Path(spec)
    if path.suffix == ".py" and path.exists():
        problems = load_problem_set(path.resolve().parent.parent)
        spec = f"{path.resolve().parent.name}/{path.stem}"
    else:
        problems = load_problem_set(root)
    try:
        return problems.get(spec)
    except KeyError as err:
        raise UsageError(str(err.args[0])) from None


def run(args: argparse.Namespace) -> int:
    from ..judge import judge_kernel, ptx_cache_dir
    from ..judge.kernel import JudgingRefused
    from ._console import make_console

    kernel = Path(args.kernel_file)
    if not kernel.is_file():
        raise UsageError(f"kernel file not found: {kernel}")
    problem = resolve_problem(args.problem, args.problems_root)
    limits, options = judging_from_args(args)
    baselines = None if args.fresh_baselines else (args.baselines or ptx_cache_dir().parent / "baselines")
    try:
        verdict = judge_kernel(problem, kernel, args.dsl, args.device, preset=args.preset, seed=args.seed,
                               limits=limits, options=options, baseline_cache_dir=baselines)
    except JudgingRefused as refused:
        raise UsageError(f"not judged: {refused}") from None
    if args.json:
        print(verdict.model_dump_json(indent=2))
        return 0
    console = make_console()
    colour = {"pass2x": "green", "pass": "green", "compile_only": "yellow"}.get(verdict.tier, "red")
    console.print(f"[bold {colour}]{verdict.tier}[/] {problem.problem_id} ({args.dsl}, {verdict.device}, "
                  f"{verdict.preset} shapes, target {verdict.target or '-'})")
    console.print(f"reason: {verdict.reason}")
    console.print(f"compiled={verdict.compiled} executed={verdict.executed} correct={verdict.correct} "
                  f"kernel_ms={ms(verdict.kernel_ms)} eager_ms={ms(verdict.eager_ms)} "
                  f"torch.compile_ms={ms(verdict.torch_compile_ms)} "
                  f"speedup={'-' if verdict.speedup is None else f'{verdict.speedup:.2f}x'}")
    console.print(f"device: {verdict.device_name or '-'}; timing: {verdict.timing_method or '-'}; "
                  f"wall {verdict.wall_s:.1f} s (compile {verdict.compile_s:.2f} s)")
    for check in verdict.checks:
        console.print(f"  {'✓' if check.passed else '✗'} {check.name}: {check.detail[:300]}")
    return 0
