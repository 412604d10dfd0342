"""Do honest CPU kernels clear the profiled-twin rule, idle and on a loaded machine, and by how much?

Every shipped CPU solution (`problems/*/solutions/*.tirx_cpu.py`, or `--problem ...`) is judged once at the
production protocol through `judge_kernel`, exactly as a trial is, optionally with `--busy N` busy-looping processes
beside it (the 2-core CI machine under a full test run). Printed per solution: the verdict, the unprofiled twin's
and the profiled call's CPU µs inside the DSL's launches for each pair (`work_evidence.profiled_twins`), their median
ratio (what the rule, mkb_ray/checker/profiled_twins.py, holds against TWIN_YARDSTICK) and the lowest single pair.
The closing line gives the lowest median over all solutions and how many were not passed. Nothing is asserted;
~8 s per solution idle.

    python3 benchmarks/profiled_twins.py                         # all 74, idle (~10 min)
    python3 benchmarks/profiled_twins.py --busy 2 --problem mlp_norm/01_fused_add_rmsnorm   # beside two busy loops
"""
from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mkb_ray.checker.profiled_twins import TWIN_FLOOR_US, TWIN_YARDSTICK  # noqa: E402
from mkb_ray.judge import judge_kernel  # noqa: E402
from mkb_ray.problems import load_problems  # noqa: E402

VARIANT = "tirx_cpu"


def _spin() -> None:
    while True:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--problem", nargs="*", help="problem ids (default: every problem with a CPU solution)")
    parser.add_argument("--busy", type=int, default=0, help="busy-looping processes beside the judge (default 0)")
    args = parser.parse_args(argv)
    problems = load_problems()
    ids = args.problem or sorted(p.problem_id for p in problems.problems if VARIANT in p.solutions)
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for spinner in spinners:
        spinner.start()
    print(f"# profiled twins, {len(ids)} shipped {VARIANT} solutions, production protocol, {args.busy} busy "
          f"loop(s) beside; the rule: median twin/profiled DSL CPU time >= {TWIN_YARDSTICK} (pairs under "
          f"{TWIN_FLOOR_US} µs profiled say nothing)")
    print("| problem | verdict | median | lowest pair | pairs twin/profiled CPU µs |")
    print("|---|---|---|---|---|")
    medians, failed = [], []
    try:
        for problem_id in ids:
            problem = problems.get(problem_id)
            started = time.perf_counter()
            verdict = judge_kernel(problem, problem.solutions[VARIANT], "tirx", "cpu")
            twins = (verdict.work_evidence or {}).get("profiled_twins") or {}
            pairs = twins.get("pairs_cpu_us") or []
            ratios = [twin / profiled for twin, profiled in pairs if profiled >= TWIN_FLOOR_US]
            median = statistics.median(ratios) if ratios else None
            if median is not None:
                medians.append((median, problem_id))
            if verdict.rejected_by:
                failed.append(f"{problem_id} ({verdict.rejected_by})")
            shown = " ".join(f"{twin:g}/{profiled:g}" for twin, profiled in pairs)
            lowest = round(min(ratios), 3) if ratios else None
            print(f"| {problem_id} | {verdict.tier}{'/' + verdict.rejected_by if verdict.rejected_by else ''} | "
                  f"{median if median is None else round(median, 3)} | {lowest} | {shown} | "
                  f"<!-- {time.perf_counter() - started:.1f} s -->", flush=True)
    finally:
        for spinner in spinners:
            spinner.terminate()
    if medians:
        low, where = min(medians)
        print(f"# lowest median {low:.3f} ({where}); {len(failed)} of {len(ids)} not passed: "
              f"{', '.join(failed) or '-'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
