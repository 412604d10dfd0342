"""Where does one evaluation's wall time go? Judges each shipped solution of the chosen variant and prints, side by
side: wall time of the judgement, the useful work (DSL compile + the timed kernel runs), and their ratio, plus
the share of process start, correctness, knockout and baselines.

    python benchmarks/evaluator_overhead.py --device cpu                    # CPU-target TIRx solutions
    python benchmarks/evaluator_overhead.py --device cuda --variant cutedsl # on a GPU host
"""
from __future__ import annotations

import argparse
import statistics

from mkb_ray.judge import JudgeOptions, judge_kernel
from mkb_ray.problems import SOLUTION_VARIANTS, load_problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--variant", choices=sorted(SOLUTION_VARIANTS), default=None,
                        help="solution variant (default: tirx_cpu on cpu, tirx on cuda)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N problems")
    args = parser.parse_args()
    variant = args.variant or ("tirx_cpu" if args.device == "cpu" else "tirx")
    dsl = SOLUTION_VARIANTS[variant][0]
    device = "cpu" if SOLUTION_VARIANTS[variant][1] == "cpu" else args.device
    problems = [p for p in load_problems().problems if variant in p.solutions]
    problems = problems[: args.limit] if args.limit else problems
    header = f"{'problem':42} {'tier':12} {'wall_s':>7} {'useful_s':>9} {'ratio':>6} {'start':>6} {'checks':>6} {'base':>6}"
    print(f"variant={variant} device={device} (default protocol: 5+2 draws, 10 warm-up + 50 timed)")
    print(header)
    ratios = []
    for problem in problems:
        verdict = judge_kernel(problem, problem.solutions[variant], dsl, device, options=JudgeOptions())
        phases = verdict.phases_s
        timed_s = phases.get("timing_kernel", 0.0)
        useful_s = verdict.compile_s + timed_s
        start_s = verdict.wall_s - verdict.worker_s + phases.get("setup", 0.0)
        checks_s = phases.get("correctness", 0.0) + phases.get("knockout", 0.0)
        ratio = verdict.wall_s / useful_s if useful_s > 0 else float("nan")
        if useful_s > 0:
            ratios.append(ratio)
        print(f"{problem.problem_id:42} {verdict.tier:12} {verdict.wall_s:7.2f} {useful_s:9.3f} {ratio:6.1f} "
              f"{start_s:6.2f} {checks_s:6.2f} {phases.get('timing_baselines', 0.0):6.2f}")
    if ratios:
        print(f"median wall / (compile + timed runs) = {statistics.median(ratios):.1f}x over {len(ratios)} evaluations")


if __name__ == "__main__":
    main()
