"""How much does the judge's timing of one kernel vary when the same kernel is judged again and again?

Judges one problem's shipped, verified solution `--runs` times with the real judge (`judge_kernel`, the path
`mkb eval` and the evaluator actor use: a fresh checker and sandboxed kernel process per judgement, taken from a
warm `CheckerPool` as the evaluator keeps one), each judgement with a fresh random seed as an agent's submission
gets (`seed=None`: the judge draws one). Which solution:
  --device cpu   (default) the CPU-target TIRx solution, `solutions/NN_name.tirx_cpu.py` (target llvm, smoke shapes)
  --device cuda  the GPU solution of `--dsl`, `solutions/NN_name.<dsl>.py` (production shapes); refused, with a
                 message, where there is no GPU (a compile_only verdict has no timing to measure)

Baselines (eager and the harness's no-op round trip, which is taken off kernel_ms and eager_ms) are by default
measured afresh in every judgement (`--baselines fresh`): two judgements then differ on both sides of the speedup,
as two judgements made with different baseline caches (two run directories, two hosts, a re-measure) do — the
conservative case. `--baselines shared` gives all runs one baseline cache, as the trials of one run directory share
theirs: eager_ms and the no-op are then measured once (and re-measured every 20th use), so the spread is the
kernel side's alone.

The pool is warm before run 1 (an evaluator's is before work arrives) and, as in the evaluator, a judgement that
takes a checker starts its replacement once it is over (`CheckerPool.replenish`: started at once, beside the timed
draws, the replacement's imports slowed them up to 8x on 2 cores). `--spares 0` starts each checker only when it is
needed, so that nothing else of the judge's runs around a judgement: the difference is the pool's share of the
noise.

Printed per run: kernel_ms, eager_ms, speedup, tier. Then, for kernel_ms, eager_ms and speedup over the runs that
passed: median, min, max, IQR (75th - 25th percentile) and coefficient of variation (sample stdev / mean); the
max/min ratio of speedup; and the suggested noise threshold:

  threshold = the 95th percentile, over all ordered pairs (i, j) with i != j of the passing runs, of
              |speedup_i / speedup_j - 1|

that is, how much faster one judgement of the same kernel can look than another. Reading a comparison of two
judged kernels: a speedup ratio within 1 +/- threshold is not evidence that one is faster than the other. The same
statistic on kernel_ms is printed too (without the eager side's noise). Percentiles interpolate linearly between
order statistics (numpy's default). With n runs there are n(n-1) pairs; 20 runs (380 pairs) make the 95th
percentile meaningful, 3 runs only show that the script works.

    python benchmarks/timing_noise.py                                  # CPU: 20 judgements, 6-15 s each on 2 cores
    python benchmarks/timing_noise.py --runs 3 --json /tmp/noise.json  # quick look
    # on the H200, in the environment .ci/gpu-check sets up (PYTHONPATH=$PWD, MKB_CACHE_DIR, MKB_BWRAP):
    python3 benchmarks/timing_noise.py --device cuda --dsl tirx --runs 20 --json $OUT/noise-tirx.json
    python3 benchmarks/timing_noise.py --device cuda --dsl cutedsl --runs 20 --no-compile-baseline

On a GPU each fresh-baseline judgement also times torch.compile of the reference (~12 s); `--no-compile-baseline`
skips it without changing kernel_ms or eager_ms (the baseline process times the compiled reference last). Timings
on a shared machine are noisy by nature: that is what this measures, so run it the way the campaign will run.
Nothing here is asserted; the exit status is 1 only when fewer than two runs passed (no spread to report).

`--draws-per-trip 1,5` (the default) judges with one timed draw per round trip to the kernel process (the judge
before 2026-12-01, second session) and with five (the default since), interleaved run by run, and prints both
summaries and the ratio of their thresholds side by side: how much of the noise was the round trip's own.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

DEFAULT_PROBLEM = "mlp_norm/01_fused_add_rmsnorm"
THRESHOLD_QUANTILE = 0.95
PASSING = ("pass", "pass2x")


@dataclass
class RunResult:
    """One judgement of the solution, as its verdict reported it."""

    index: int
    seed: int
    tier: str
    reason: str
    kernel_ms: Optional[float]
    eager_ms: Optional[float]
    speedup: Optional[float]
    harness_overhead_ms: Optional[float]
    kernel_roundtrip_ms: Optional[float]
    baseline_source: Optional[str]
    wall_s: float

    @property
    def usable(self) -> bool:
        """A passing verdict with every number the statistics need (a failure has no timing to compare)."""
        return (self.tier in PASSING and self.kernel_ms is not None and self.eager_ms is not None
                and self.speedup is not None)


@dataclass
class Spread:
    """How one measured quantity varied over the passing runs."""

    count: int
    median: float
    min: float
    max: float
    iqr: float  # 75th - 25th percentile
    cv: Optional[float]  # sample stdev / mean; None below two values
    max_over_min: Optional[float]  # None when min is 0
    pairwise_p95: Optional[float]  # 95th percentile of |v_i / v_j - 1| over ordered pairs; None below two values


@dataclass
class Summary:
    runs: int
    passed: int
    kernel_ms: Spread
    eager_ms: Spread
    speedup: Spread
    threshold: Optional[float]  # = speedup.pairwise_p95, the suggested "faster by more than noise" margin
    threshold_definition: str


THRESHOLD_DEFINITION = (f"{THRESHOLD_QUANTILE * 100:g}th percentile over all ordered pairs (i != j) of passing runs "
                        f"of |speedup_i / speedup_j - 1|: how much faster one judgement of the same kernel can look "
                        f"than another")


# --- statistics ----------------------------------------------------------------------------------------------------

def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics (numpy's default), defined for n >= 1
    (statistics.quantiles needs two points and returns cut points, not one quantile)."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def pairwise_relative_differences(values: Sequence[float]) -> list[float]:
    """|v_i / v_j - 1| for every ordered pair i != j. Ordered, because a/b - 1 and b/a - 1 differ: both directions
    are ways one judgement can look faster or slower than another."""
    return [abs(a / b - 1.0) for i, a in enumerate(values) for j, b in enumerate(values) if i != j and b != 0]


def spread(values: Sequence[float]) -> Spread:
    low, high = min(values), max(values)
    mean = statistics.fmean(values)
    pairs = pairwise_relative_differences(values)
    return Spread(
        count=len(values), median=statistics.median(values), min=low, max=high,
        iqr=quantile(values, 0.75) - quantile(values, 0.25),
        cv=statistics.stdev(values) / mean if len(values) >= 2 and mean != 0 else None,
        max_over_min=high / low if low != 0 else None,
        pairwise_p95=quantile(pairs, THRESHOLD_QUANTILE) if pairs else None)


def summarize(runs: Sequence[RunResult]) -> Optional[Summary]:
    """The spread of the passing runs; None when fewer than two passed (a spread of one is no spread)."""
    usable = [r for r in runs if r.usable]
    if len(usable) < 2:
        return None
    # The `is not None` filters only narrow the types: a usable run has all three numbers.
    speedups = spread([r.speedup for r in usable if r.speedup is not None])
    return Summary(runs=len(runs), passed=len(usable),
                   kernel_ms=spread([r.kernel_ms for r in usable if r.kernel_ms is not None]),
                   eager_ms=spread([r.eager_ms for r in usable if r.eager_ms is not None]), speedup=speedups,
                   threshold=speedups.pairwise_p95, threshold_definition=THRESHOLD_DEFINITION)


# --- choosing and judging the solution -----------------------------------------------------------------------------

def solution_variant(dsl: str, device: str) -> str:
    """The shipped solution to judge: the CPU target exists for TIRx only; on a GPU the chosen DSL's solution."""
    if device == "cpu":
        if dsl != "tirx":
            raise SystemExit("--device cpu judges the CPU-target TIRx solution (tirx_cpu); CuTe DSL kernels have no "
                             "CPU target: use --dsl tirx, or --device cuda on a GPU host")
        return "tirx_cpu"
    return dsl


def require_gpu(device: str) -> None:
    """Without a GPU a GPU solution is compiled to PTX only (tier compile_only): there is no timing to study."""
    from mkb_ray.judge import detect_gpu

    if device == "cuda" and not detect_gpu():
        raise SystemExit("--device cuda needs a usable NVIDIA GPU, and torch sees none here (without one the judge "
                         "only compiles GPU kernels to PTX, so there is no timing to measure); run it on the H200, "
                         "or use --device cpu")


def load_solution(problem_id: str, variant: str) -> tuple[Any, Path]:
    """The problem (from the shipped suite) and the path of its `variant` solution."""
    from mkb_ray.problems import load_problems

    try:
        problem = load_problems().get(problem_id)
    except KeyError as err:
        raise SystemExit(str(err.args[0])) from None
    if variant not in problem.solutions:
        raise SystemExit(f"{problem_id} ships no {variant} solution (has: {', '.join(sorted(problem.solutions))})")
    return problem, problem.solutions[variant]


def judge_once(index: int, problem: Any, kernel: Path, dsl: str, device: str, options: Any, pool: Any,
               baseline_cache_dir: Optional[Path]) -> RunResult:
    from mkb_ray.judge import judge_kernel

    started = time.perf_counter()
    # seed=None: the judge draws a fresh seed, exactly as for an agent's submission (the evaluator passes none).
    verdict = judge_kernel(problem, kernel, dsl, device, seed=None, options=options, pool=pool,
                           baseline_cache_dir=baseline_cache_dir)
    return RunResult(index=index, seed=verdict.seed, tier=verdict.tier, reason=verdict.reason,
                     kernel_ms=verdict.kernel_ms, eager_ms=verdict.eager_ms, speedup=verdict.speedup,
                     harness_overhead_ms=verdict.harness_overhead_ms, kernel_roundtrip_ms=verdict.kernel_roundtrip_ms,
                     baseline_source=verdict.baseline_source, wall_s=time.perf_counter() - started)


# --- printing ------------------------------------------------------------------------------------------------------

def number(value: Optional[float], digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def percent(value: Optional[float]) -> str:
    return "-" if value is None else f"{value * 100:.2f}%"


def print_run(result: RunResult, total: int) -> None:
    speedup = "-" if result.speedup is None else f"{result.speedup:.3f}x"
    print(f"run {result.index:>3}/{total}  kernel {number(result.kernel_ms):>9} ms  eager {number(result.eager_ms):>9} "
          f"ms  speedup {speedup:>8}  {result.tier:8} (seed {result.seed}, noop {number(result.harness_overhead_ms)} "
          f"ms, baselines {result.baseline_source or '-'}, wall {result.wall_s:.1f} s)", flush=True)
    if not result.usable:
        print(f"          not counted: {result.reason[:200]}", flush=True)


def print_summary(summary: Summary) -> None:
    print(f"\nover the {summary.passed} passing run(s) of {summary.runs}:")
    print(f"{'':10} {'median':>10} {'min':>10} {'max':>10} {'IQR':>10} {'CV':>8} {'max/min':>8} {'pair p95':>9}")
    for name in ("kernel_ms", "eager_ms", "speedup"):
        s: Spread = getattr(summary, name)
        print(f"{name:10} {number(s.median):>10} {number(s.min):>10} {number(s.max):>10} {number(s.iqr):>10} "
              f"{percent(s.cv):>8} {number(s.max_over_min):>8} {percent(s.pairwise_p95):>9}")
    print(f"\nspeedup max/min: {number(summary.speedup.max_over_min)}")
    print(f"suggested noise threshold: {percent(summary.threshold)}  "
          f"(kernel_ms alone: {percent(summary.kernel_ms.pairwise_p95)})")
    print(f"  definition: {summary.threshold_definition}; a speedup ratio between two judged kernels within "
          f"1 +/- threshold is not evidence that one is faster")
    if summary.passed < 10:
        print(f"  (only {summary.passed} runs, {summary.passed * (summary.passed - 1)} pairs: too few for a "
              f"95th percentile to mean much; use --runs 20 or more)")


# --- main ----------------------------------------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", default=DEFAULT_PROBLEM, help=f"problem id (default {DEFAULT_PROBLEM})")
    parser.add_argument("--dsl", choices=["tirx", "cutedsl"], default="tirx",
                        help="the solution's DSL (default tirx; --device cpu has only tirx)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where to judge (default cpu)")
    parser.add_argument("--runs", type=int, default=20, help="independent judgements (default 20; at least 2)")
    parser.add_argument("--baselines", choices=["fresh", "shared"], default="fresh",
                        help="fresh: every judgement measures eager and the no-op anew (default); shared: one "
                             "baseline cache for all runs, as in one run directory")
    parser.add_argument("--spares", type=int, default=None, metavar="N",
                        help="checkers kept started ahead (default: as the evaluator actor, 6 on cuda and 1 on cpu; "
                             "0 starts each checker only when needed, so none starts while another is timing)")
    parser.add_argument("--no-compile-baseline", dest="compile_baseline", action="store_false", default=None,
                        help="skip timing torch.compile of the reference (on by default on GPUs); kernel_ms and "
                             "eager_ms are unchanged")
    parser.add_argument("--draws-per-trip", default="1,5", metavar="K[,K...]",
                        help="timed draws per round trip to compare, interleaved run by run (default 1,5)")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT.json",
                        help="write the configuration, every run and the summary here")
    args = parser.parse_args()
    if args.runs < 2:
        parser.error("--runs must be at least 2 (a spread needs two judgements)")
    try:
        args.draws_per_trip = [int(k) for k in str(args.draws_per_trip).split(",") if k.strip()]
    except ValueError:
        parser.error(f"--draws-per-trip: expected integers separated by commas, got {args.draws_per_trip!r}")
    if not args.draws_per_trip or min(args.draws_per_trip) < 1:
        parser.error("--draws-per-trip: every K must be at least 1")
    return args


def write_json(path: Path, config: dict[str, Any], runs: dict[int, list[RunResult]],
               summaries: dict[int, Optional[Summary]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"config": config,
            "by_draws_per_trip": {str(k): {"runs": [asdict(r) | {"usable": r.usable} for r in runs[k]],
                                           "summary": asdict(summaries[k]) if summaries[k] else None}
                                  for k in runs}}
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {path}")


def main() -> int:
    args = parse_args()
    variant = solution_variant(args.dsl, args.device)
    require_gpu(args.device)
    problem, kernel = load_solution(args.problem, variant)

    from mkb_ray.judge import GPU_SPARES, CheckerPool, JudgeOptions, default_preset

    options = {k: JudgeOptions(compile_baseline=args.compile_baseline, draws_per_trip=k) for k in args.draws_per_trip}
    first = options[args.draws_per_trip[0]].resolved(args.device)
    spares = args.spares if args.spares is not None else (GPU_SPARES if args.device == "cuda" else 1)
    config = {"problem_id": problem.problem_id, "variant": variant, "dsl": args.dsl, "device": args.device,
              "kernel_path": str(kernel), "preset": default_preset(args.device), "runs": args.runs,
              "baselines": args.baselines, "spares": spares, "draws_per_trip": args.draws_per_trip,
              "options": asdict(first), "host": platform.node(), "cpus": os.cpu_count(),
              "threshold_quantile": THRESHOLD_QUANTILE}
    print(f"timing noise: {problem.problem_id} {variant} solution ({kernel.name}) on {args.device}, "
          f"{config['preset']} shapes, {args.runs} judgements per setting, draws per round trip "
          f"{args.draws_per_trip}, baselines {args.baselines}, spares {spares}, {first.timed} timed draws each; "
          f"host {platform.node()}, {os.cpu_count()} CPUs", flush=True)

    # The warm-up wait lives in the overhead benchmark beside this file (run as a script, this folder is on sys.path).
    from evaluator_overhead import wait_for_spare

    runs: dict[int, list[RunResult]] = {k: [] for k in args.draws_per_trip}
    # A shared cache lives only for this script: a user's ~/.cache entry would make even run 1 'cached'. The
    # baseline cache key includes draws per trip, so each setting keeps its own baselines in it.
    with (tempfile.TemporaryDirectory(prefix="mkb-noise-baselines-") as cache_dir,
          CheckerPool(args.device, spares=spares) as pool):
        baseline_cache_dir = Path(cache_dir) if args.baselines == "shared" else None
        # A cold spare finishes its imports while run 1 already times (unlike any later run): start warm.
        print(f"pool warm after {wait_for_spare(pool):.1f} s", flush=True)
        for index in range(1, args.runs + 1):
            for k in args.draws_per_trip:  # interleaved, so both settings see the same drift of the machine
                result = judge_once(index, problem, kernel, args.dsl, args.device, options[k], pool,
                                    baseline_cache_dir)
                print(f"[{k} per trip] ", end="")
                print_run(result, args.runs)
                runs[k].append(result)

    summaries = {k: summarize(runs[k]) for k in args.draws_per_trip}
    for k, summary in summaries.items():
        print(f"\n=== {k} timed draw(s) per round trip ===")
        if summary is None:
            print(f"only {sum(r.usable for r in runs[k])} of {len(runs[k])} runs passed: no spread to report")
        else:
            print_summary(summary)
    measured = {k: s for k, s in summaries.items() if s is not None and s.threshold is not None}
    if len(measured) > 1:
        print("\nside by side (same runs, interleaved):")
        print(f"{'per trip':>8} {'threshold':>10} {'kernel p95':>10} {'median speedup':>15} {'median noop ms':>15}")
        for k, s in measured.items():
            noops = [r.harness_overhead_ms for r in runs[k] if r.harness_overhead_ms is not None]
            print(f"{k:>8} {percent(s.threshold):>10} {percent(s.kernel_ms.pairwise_p95):>10} "
                  f"{number(s.speedup.median):>15} {number(statistics.median(noops) if noops else None):>15}")
        low, high = min(measured), max(measured)
        if measured[high].threshold:
            print(f"threshold ratio ({low} per trip / {high} per trip): "
                  f"{measured[low].threshold / measured[high].threshold:.2f}x")
    if args.json is not None:
        write_json(args.json, config, runs, summaries)
    return 0 if any(s is not None for s in summaries.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
