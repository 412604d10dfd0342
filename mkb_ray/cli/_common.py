"""What several `mkb` subcommands share: the usage error, the problems root, and the judging options — whose
defaults come from `JudgeOptions` / `JudgeLimits` themselves, never repeated here."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Optional

from ..checker.request import JudgeOptions

PROBLEMS_ROOT_HELP = ("a problems root in the MetaKernelBench layout (<family>/NN_name.py); default: the shipped "
                      "suite")


class UsageError(Exception):
    """Bad usage or a missing file: one line on stderr, exit code 2."""


def add_experiment_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", type=Path, metavar="CONFIG",
                        help="experiment YAML, e.g. experiments/quickstart.yaml")


def add_problems_root(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--problems-root", type=Path, help=PROBLEMS_ROOT_HELP)


def load_problem_set(root: Optional[Path]) -> Any:
    """The problems under `root` (None: the shipped suite); a missing root is a usage error."""
    from ..problems import load_problems

    try:
        problems = load_problems(root)
    except FileNotFoundError as err:
        raise UsageError(str(err)) from None
    if not problems.problems and not problems.errors:
        # Pointing at a checkout's root rather than its problems/ folder is the usual slip: name the fix.
        nested = problems.root / "problems"
        hint = (f"; {nested} holds problems: pass --problems-root {nested}"
                if nested.is_dir() and any(nested.glob("*/*.py")) else "")
        raise UsageError(f"no problems under {problems.root} (expected <family>/NN_name.py files){hint}")
    return problems


def add_judging_options(parser: argparse.ArgumentParser) -> None:
    """--timeout-s, --warmup, --timed, --no-compile-baseline; defaults are JudgeLimits' and JudgeOptions'."""
    from ..judge.process import JudgeLimits

    group = parser.add_argument_group("judging")
    group.add_argument("--timeout-s", type=float, default=JudgeLimits.timeout_s,
                       help=f"hard limit per judgement (default {JudgeLimits.timeout_s:g})")
    group.add_argument("--warmup", type=int, default=JudgeOptions.warmup,
                       help=f"warm-up draws before timing (default {JudgeOptions.warmup})")
    group.add_argument("--timed", type=int, default=JudgeOptions.timed,
                       help=f"timed draws (default {JudgeOptions.timed})")
    group.add_argument("--protocol", choices=["mkb-ray", "mkb"], default=JudgeOptions.protocol,
                       help="grading protocol: mkb-ray (default: this judge) or mkb (MetaKernelBench's, to compare "
                            "with the paper like for like: no L2 flush, no outlier draws, the global tolerance "
                            "rule only); the verdict names it")
    group.add_argument("--no-compile-baseline", dest="compile_baseline", action="store_false", default=None,
                       help="skip timing torch.compile of the reference (on by default on GPUs; inductor's first "
                            "compile costs 10-60 s per judgement)")


def judging_from_args(args: argparse.Namespace) -> tuple[Any, JudgeOptions]:
    """The JudgeLimits and JudgeOptions that `add_judging_options` collected."""
    from ..judge.process import JudgeLimits

    try:
        options = JudgeOptions(warmup=args.warmup, timed=args.timed, compile_baseline=args.compile_baseline,
                               protocol=args.protocol)
    except ValueError as err:
        raise UsageError(str(err)) from None
    return JudgeLimits(timeout_s=args.timeout_s), options


def store_missing(run_dir: Path, command: str) -> bool:
    """True (after saying so on stderr) when `run_dir` holds no run store; the caller exits 2."""
    import sys

    from ..store.sqlite_store import STORE_FILE

    if (run_dir / STORE_FILE).is_file():
        return False
    print(f"mkb {command}: no run store at {run_dir / STORE_FILE}", file=sys.stderr)
    return True
