"""Does the judge's GPU time agree with in-process CUDA-event timing of the same call, and does it repeat?

For each problem (default: the first two of each family, 12 in all) and each DSL (tirx, cutedsl), on one GPU:

1. **In-process** (the reference method, MetaKernelBench's and KernelBench's): the shipped solution and the
   problem's eager reference called in one plain Python process — a 256 MiB L2 flush, then CUDA events around the
   call, then a device-wide wait; 10 warm-up and 50 timed calls on one draw of inputs, median; `--runs` runs with
   fresh seeds. No judge code is involved (`inprocess` mode of this file, one process per DSL). Measured twice:
   as is (`events`: the span then holds the host's launch path, since the device is idle when `start` passes), and
   with the judge's launch lead (`led`: a ~1 ms spin queued ahead of `start`, kernel_runner/draw_clock.py), which
   is the call's device time. The goal compares the judge with `led`; `events` is printed beside it.
2. **The judge**: `--runs` judgements of the same solution through `judge_kernel` (a warm `CheckerPool`, one
   baseline cache shared by the runs as the trials of one run directory share theirs; a fresh seed each), at the
   production protocol.

Printed per (problem, DSL), side by side: kernel_ms and eager_ms medians of both methods and their ratio
(judge / in-process; the goal is 0.9-1.1), the pair-p95 of the speedup over the runs of each method (how much
faster one judgement of the same kernel can look than another; the goal is <= 5 % for kernels >= 50 µs, <= 15 %
for 10-50 µs), the judge's own-clock figure `kernel_wall_ms` (the upper bound it keeps) and the median evaluation
wall with cached baselines (net of waits for the device lock while another row times; rows recorded before
2026-12-05 include them; with --jobs 1 every spare checker is warm when a judgement starts, as after an agent's
turn) with the part of it spent compiling the submission, and whether any profiled kernel was one no DSL compile
produced (the foreign-kernel evidence, `work_evidence.unnamed_us`). Nothing is asserted. Results go to `--out`
(JSON per row as it finishes, so a run cut short resumes with `--resume`) and a table to stdout.

    python3 benchmarks/timing_fidelity.py --out /tmp/fidelity          # on the H200, ~10 min
    python3 benchmarks/timing_fidelity.py --families mlp_norm moe --runs 3 --out /tmp/f   # a quick look
    python3 benchmarks/timing_fidelity.py --report /tmp/fidelity       # the table again, from the JSON
    python3 benchmarks/timing_fidelity.py --draws-per-trip 25 --out /tmp/fidelity   # longer trips, kept apart
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # timing_noise's statistics and evaluator_overhead's pool wait

from timing_noise import pairwise_relative_differences, quantile  # noqa: E402

FLUSH_BYTES = 256 * 1024 * 1024
WARMUP, TIMED = 10, 50
GOAL_RATIO = (0.9, 1.1)


def pair_p95(values: Sequence[float]) -> Optional[float]:
    pairs = pairwise_relative_differences(values)
    return quantile(pairs, 0.95) if pairs else None


# --- the reference method, in one plain process ----------------------------------------------------------------

def inprocess(rows: list[tuple[str, str]], runs: int) -> list[dict[str, Any]]:
    """CUDA events around each call of each (problem_id, solution path), `runs` fresh-seed runs each."""
    import importlib.util

    import torch

    from mkb_ray.checker.problem_loader import load_problem
    from mkb_ray.kernel_runner.draw_clock import LAUNCH_LEAD_CYCLES
    from mkb_ray.problems import load_problems

    problems = load_problems()
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timed(fn: Any, inputs: list[Any], lead_cycles: int = 0) -> float:
        samples = []
        for index in range(WARMUP + TIMED):
            flush.zero_()
            torch.cuda.synchronize()
            if lead_cycles:
                torch.cuda._sleep(lead_cycles)
            start.record()
            fn(*inputs)
            end.record()
            torch.cuda.synchronize()
            if index >= WARMUP:
                samples.append(start.elapsed_time(end))
        return statistics.median(samples)

    results = []
    for problem_id, solution in rows:
        problem = problems.get(problem_id)
        loaded = load_problem(problem.path, problem_id, "production")
        spec = importlib.util.spec_from_file_location(f"solution_{len(results)}", solution)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        reference = torch.no_grad()(loaded.module.reference)
        kernel_ms, eager_ms, kernel_led_ms, eager_led_ms = [], [], [], []
        error = None
        try:
            for run in range(runs):
                torch.manual_seed(10_000 + run)
                with torch.device("cuda"):
                    inputs = list(loaded.module.make_inputs())
                kernel_ms.append(timed(module.solve, inputs))
                eager_ms.append(timed(reference, inputs))
                kernel_led_ms.append(timed(module.solve, inputs, LAUNCH_LEAD_CYCLES))
                eager_led_ms.append(timed(reference, inputs, LAUNCH_LEAD_CYCLES))
        except Exception as err:  # a row that cannot run says why; the others go on
            error = f"{type(err).__name__}: {err}"[:300]
        results.append({"problem_id": problem_id, "solution": str(solution), "kernel_ms": kernel_ms,
                        "eager_ms": eager_ms, "kernel_led_ms": kernel_led_ms, "eager_led_ms": eager_led_ms,
                        "error": error})
        print(f"in-process {problem_id} {Path(solution).name}: kernel {kernel_ms[:3]}... eager {eager_ms[:3]}...",
              file=sys.stderr, flush=True)
    return results


def run_inprocess(rows: list[tuple[str, str]], runs: int) -> list[dict[str, Any]]:
    """`inprocess` in a child process of its own (nothing of the judge's is imported or running there)."""
    spec = json.dumps({"rows": rows, "runs": runs})
    done = subprocess.run([sys.executable, __file__, "--inprocess-spec", spec], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"in-process timing failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- the judge ---------------------------------------------------------------------------------------------------

def judge_runs(problem: Any, kernel: Path, dsl: str, runs: int, pool: Any, cache_dir: Path,
               device_lock: Path, per_trip: Optional[int] = None,
               between: Callable[[], float] = lambda: 0.0) -> list[dict[str, Any]]:
    """`runs` judgements; `between()` runs before each, outside its clock (waits for warm spares, see `main`)."""
    from mkb_ray.judge import JudgeOptions, judge_kernel

    verdicts = []
    options = JudgeOptions(compile_baseline=False, draws_per_trip=per_trip)
    for _ in range(runs):
        spare_wait_s = between()
        started = time.perf_counter()
        verdict = judge_kernel(problem, kernel, dsl, "cuda", seed=None, options=options,
                               pool=pool, baseline_cache_dir=cache_dir, device_lock=device_lock)
        evidence = verdict.work_evidence or {}
        verdicts.append({"tier": verdict.tier, "reason": verdict.reason[:300], "kernel_ms": verdict.kernel_ms,
                         "eager_ms": verdict.eager_ms, "speedup": verdict.speedup,
                         "kernel_wall_ms": verdict.kernel_wall_ms, "eager_wall_ms": verdict.eager_wall_ms,
                         "timing_method": verdict.timing_method, "late_draws": verdict.late_draws,
                         "baseline_source": verdict.baseline_source, "wall_s": time.perf_counter() - started,
                         "spare_wait_s": spare_wait_s,
                         # --jobs > 1: the time this judgement waited for another to finish timing on the GPU
                         "lock_wait_s": (verdict.phases_s or {}).get("device_lock_wait", 0.0),
                         # where the evaluation wall goes (setup, compile, correctness, timing...): the <= 3 s target
                         "phases_s": verdict.phases_s, "compile_s": verdict.compile_s,
                         "trip_positions": next((c.detail for c in verdict.checks if c.name == "trip_positions"),
                                                None),
                         # issue 25's foreign-kernel evidence: profiled time in kernels no DSL compile produced
                         "unnamed_us": evidence.get("unnamed_us"), "unnamed_kernels": evidence.get("unnamed_kernels"),
                         "compiled_kernels": sorted({k for c in verdict.compiles for k in c.kernels})[:8]})
    return verdicts


# --- the table ---------------------------------------------------------------------------------------------------

def _inprocess_figures(prefix: str, kernel_ms: list[float], eager_ms: list[float]) -> dict[str, Any]:
    """Medians of one in-process series, the median speedup and its pair-p95, keyed `<prefix>_...` (none if empty)."""
    if not (kernel_ms and eager_ms):
        return {}
    speedups = [e / k for k, e in zip(kernel_ms, eager_ms)]
    return {f"{prefix}_kernel_ms": statistics.median(kernel_ms), f"{prefix}_eager_ms": statistics.median(eager_ms),
            f"{prefix}_speedup": statistics.median(speedups), f"{prefix}_pair_p95": pair_p95(speedups)}


def summarise(row: dict[str, Any]) -> dict[str, Any]:
    inproc = row["inprocess"]
    passing = [v for v in row["judge"] if v["tier"] in ("pass", "pass2x") and v["speedup"]]
    out: dict[str, Any] = {"problem_id": row["problem_id"], "dsl": row["dsl"] + _trip_label(row.get("per_trip")),
                           "judged": len(row["judge"]), "passed": len(passing), "inprocess_error": inproc.get("error"),
                           "unnamed_us": sum(v.get("unnamed_us") or 0.0 for v in row["judge"])}
    out.update(_inprocess_figures("ev", inproc["kernel_ms"], inproc["eager_ms"]))
    # The goal's reference: the led in-process times where measured (rows before the launch lead have none, and
    # then the events are the reference, as they were).
    out["reference"] = "led" if inproc.get("kernel_led_ms") else "events"
    out.update(_inprocess_figures("ip", inproc.get("kernel_led_ms") or inproc["kernel_ms"],
                                  inproc.get("eager_led_ms") or inproc["eager_ms"]))
    if passing:
        out.update(kernel_ms=statistics.median(v["kernel_ms"] for v in passing),
                   eager_ms=statistics.median(v["eager_ms"] for v in passing),
                   speedup=statistics.median(v["speedup"] for v in passing),
                   pair_p95=pair_p95([v["speedup"] for v in passing]),
                   kernel_pair_p95=pair_p95([v["kernel_ms"] for v in passing]),
                   kernel_wall_ms=statistics.median(v["kernel_wall_ms"] for v in passing if v["kernel_wall_ms"]),
                   # The evaluation's own wall with cached baselines: waits for the device lock (another row's
                   # judgement timing, --jobs > 1) taken off.
                   wall_s_cached=statistics.median([v["wall_s"] - (v.get("lock_wait_s") or 0.0) for v in passing
                                                    if v["baseline_source"] == "cached"] or [float("nan")]),
                   # Of it, compiling the submission (a new one always pays this; TVM's CUDA build dominates TIRx's).
                   compile_s=statistics.median([v["compile_s"] for v in passing if v["baseline_source"] == "cached"
                                                and v.get("compile_s") is not None] or [float("nan")]),
                   late_draws=sum(v["late_draws"] or 0 for v in passing),
                   method=passing[0]["timing_method"])
    if "kernel_ms" in out and "ip_kernel_ms" in out:
        out["kernel_ratio"] = out["kernel_ms"] / out["ip_kernel_ms"]
        out["eager_ratio"] = out["eager_ms"] / out["ip_eager_ms"]
        goal = 0.05 if out["ip_kernel_ms"] >= 0.05 else 0.15
        out["goal_met"] = bool(GOAL_RATIO[0] <= out["kernel_ratio"] <= GOAL_RATIO[1]
                               and GOAL_RATIO[0] <= out["eager_ratio"] <= GOAL_RATIO[1]
                               and out["pair_p95"] is not None and out["pair_p95"] <= goal)
        out["pair_goal"] = goal
    failures = [v["reason"] for v in row["judge"] if v["tier"] not in ("pass", "pass2x")]
    out["failures"] = failures[:2]
    return out


def fmt(value: Any, spec: str = ".4g") -> str:
    return "-" if value is None else format(value, spec)


def pct(value: Optional[float]) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def print_table(summaries: list[dict[str, Any]]) -> None:
    """`in-proc`: the goal's reference (led where measured, `ref` says which); `events`: in-process events without
    the lead (host launch path included), for comparison."""
    print(f"{'problem':34} {'dsl':8} {'judge k_ms':>10} {'in-proc':>9} {'ratio':>6} {'events':>8} {'judge e_ms':>10} "
          f"{'in-proc':>9} {'ratio':>6} {'events':>8} {'speedup j/ip':>14} {'p95 judge':>9} {'p95 ip':>7} "
          f"{'p95 ev':>7} {'goal':>5} {'wall k_ms':>9} {'eval s':>6} {'compile':>7}  pass ref")
    for s in summaries:
        print(f"{s['problem_id']:34} {s['dsl']:8} {fmt(s.get('kernel_ms')):>10} {fmt(s.get('ip_kernel_ms')):>9} "
              f"{fmt(s.get('kernel_ratio'), '.3f'):>6} {fmt(s.get('ev_kernel_ms')):>8} {fmt(s.get('eager_ms')):>10} "
              f"{fmt(s.get('ip_eager_ms')):>9} {fmt(s.get('eager_ratio'), '.3f'):>6} {fmt(s.get('ev_eager_ms')):>8} "
              f"{fmt(s.get('speedup'), '.2f'):>6}/{fmt(s.get('ip_speedup'), '.2f'):<7} {pct(s.get('pair_p95')):>9} "
              f"{pct(s.get('ip_pair_p95')):>7} {pct(s.get('ev_pair_p95')):>7} "
              f"{('yes' if s.get('goal_met') else 'NO'):>5} "
              f"{fmt(s.get('kernel_wall_ms')):>9} {fmt(s.get('wall_s_cached'), '.2f'):>6} "
              f"{fmt(s.get('compile_s'), '.2f'):>7}  "
              f"{s['passed']}/{s['judged']} {s['reference']}")
        for failure in s["failures"]:
            print(f"    failed: {failure[:160]}")
        if s.get("inprocess_error"):
            print(f"    in-process: {s['inprocess_error']}")
    rows = [s for s in summaries if "kernel_ratio" in s]
    if rows:
        met = sum(bool(s["goal_met"]) for s in rows)
        print(f"\n{met}/{len(rows)} rows meet the goal (kernel and eager within ±10 % of in-process, speedup pair-p95 "
              f"within 5 % for kernels >= 50 µs, 15 % for 10-50 µs)")
        print(f"kernel ratio judge/in-process: median {statistics.median(s['kernel_ratio'] for s in rows):.3f}, "
              f"range {min(s['kernel_ratio'] for s in rows):.3f}-{max(s['kernel_ratio'] for s in rows):.3f}; eager "
              f"median {statistics.median(s['eager_ratio'] for s in rows):.3f}, range "
              f"{min(s['eager_ratio'] for s in rows):.3f}-{max(s['eager_ratio'] for s in rows):.3f}")
        unnamed = [s for s in rows if s.get("unnamed_us")]
        print(f"profiled GPU time in kernels no DSL compile produced (work_evidence.unnamed_us): {len(unnamed)} of "
              f"{len(rows)} rows" + (": " + ", ".join(f"{s['problem_id']} {s['dsl']}" for s in unnamed) if unnamed
                                     else ""))
        bounds = [s["kernel_wall_ms"] / s["kernel_ms"] for s in rows if s.get("kernel_wall_ms")]
        if bounds:
            print(f"the checker's own clock over the device record (kernel_wall_ms / kernel_ms): "
                  f"{min(bounds):.2f}-{max(bounds):.2f}, median {statistics.median(bounds):.2f}")


WALL_PARTS = ("setup", "first_call", "correctness", "integrity", "timing_kernel", "timing_baselines", "close")


def eval_wall_parts(row: dict[str, Any]) -> Optional[dict[str, float]]:
    """Where a row's evaluation wall goes, medians over its passing judgements with cached baselines: the
    verdict's phases (`first_call` holds the submission's compile, shown apart as `compile`), the kernel
    process's end (`close`) and the rest (`other`: the checker hand-off, pipes, the verdict's return)."""
    judged = [v for v in row["judge"] if v["tier"] in ("pass", "pass2x") and v["baseline_source"] == "cached"]
    if not judged:
        return None
    parts: dict[str, list[float]] = {name: [] for name in ("wall", "compile", *WALL_PARTS, "other")}
    for v in judged:
        phases = v.get("phases_s") or {}
        wall = v["wall_s"] - (v.get("lock_wait_s") or 0.0)
        parts["wall"].append(wall)
        parts["compile"].append(v.get("compile_s") or 0.0)
        for name in WALL_PARTS:
            parts[name].append(float(phases.get(name, 0.0)))
        parts["other"].append(wall - sum(float(phases.get(name, 0.0)) for name in WALL_PARTS))
    return {name: statistics.median(values) for name, values in parts.items()}


def print_eval_walls(rows: list[dict[str, Any]]) -> None:
    """The evaluation wall with cached baselines (target <= 3 s), split by phase, one line per row."""
    split = [(row, eval_wall_parts(row)) for row in rows]
    split = [(row, parts) for row, parts in split if parts]
    if not split:
        return
    names = ("wall", "compile", *WALL_PARTS, "other")
    print("\nevaluation wall with cached baselines, median seconds per judgement (first_call includes compile):")
    print(f"{'problem':34} {'dsl':8} " + " ".join(f"{n[:9]:>9}" for n in names))
    for row, parts in split:
        print(f"{row['problem_id']:34} {row['dsl']:8} " + " ".join(f"{parts[n]:>9.2f}" for n in names))
    walls = [parts["wall"] for _, parts in split]
    print(f"{sum(w <= 3.0 for w in walls)}/{len(walls)} rows within 3 s (median wall {statistics.median(walls):.2f} s, "
          f"max {max(walls):.2f} s)")


# --- main --------------------------------------------------------------------------------------------------------

def _trip_label(per_trip: Optional[int]) -> str:
    return f"/k{per_trip}" if per_trip else ""


def row_path(out: Path, problem_id: str, dsl: str, per_trip: Optional[int]) -> Path:
    return out / f"row-{problem_id.replace('/', '-')}-{dsl}{_trip_label(per_trip).replace('/', '-')}.json"


def chosen(families: Optional[list[str]], per_family: int, problem_ids: Optional[list[str]]) -> list[Any]:
    from mkb_ray.problems import load_problems

    problems = load_problems()
    everything = sorted(problems.problems, key=lambda p: p.problem_id)
    if problem_ids:
        try:
            return [problems.get(pid) for pid in problem_ids]
        except KeyError as err:
            raise SystemExit(f"--problem: {err.args[0]}") from None
    by_family: dict[str, list[Any]] = {}
    for problem in everything:
        by_family.setdefault(problem.family, []).append(problem)
    unknown = sorted(set(families or []) - set(by_family))
    if unknown:
        raise SystemExit(f"--families: no family {', '.join(unknown)} (known: {', '.join(sorted(by_family))})")
    return [p for family in sorted(by_family) if not families or family in families
            for p in by_family[family][:per_family]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", nargs="*", help="families to take problems from (default: all six)")
    parser.add_argument("--per-family", type=int, default=2, help="problems per family (default 2)")
    parser.add_argument("--problem", nargs="*", help="problem ids instead of --families")
    parser.add_argument("--dsls", nargs="*", default=["tirx", "cutedsl"])
    parser.add_argument("--runs", type=int, default=10, help="judgements and in-process runs per row (default 10)")
    parser.add_argument("--out", type=Path, help="directory for one JSON per row (and summary.json)")
    parser.add_argument("--jobs", type=int, default=2,
                        help="rows judged at once (default 2): each judgement still times alone under the device lock, "
                             "the others' compiles and checks overlap it")
    parser.add_argument("--resume", action="store_true", help="skip rows whose JSON is already in --out")
    parser.add_argument("--report", type=Path, help="only print the table from a finished --out directory")
    parser.add_argument("--draws-per-trip", type=int, default=None, metavar="K",
                        help="timed draws per round trip for the judge (default: the judge's own, 5 on GPUs); rows "
                             "of another K are kept apart in --out, so one directory can compare settings")
    parser.add_argument("--inprocess-spec", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inprocess_spec:
        spec = json.loads(args.inprocess_spec)
        print(json.dumps(inprocess([tuple(r) for r in spec["rows"]], spec["runs"])))
        return 0
    if args.report:
        rows = [json.loads(p.read_text()) for p in sorted(args.report.glob("row-*.json"))]
        print_table([summarise(r) for r in rows])
        print_eval_walls(rows)
        return 0

    import torch

    if not torch.cuda.is_available():
        raise SystemExit("timing_fidelity needs a GPU: it compares the judge with in-process CUDA-event timing")
    from evaluator_overhead import wait_for_spare

    from mkb_ray.judge import GPU_SPARES, CheckerPool

    out = args.out or Path(tempfile.mkdtemp(prefix="mkb-fidelity-"))
    out.mkdir(parents=True, exist_ok=True)
    problems = chosen(args.families, args.per_family, args.problem)
    todo = [(p, dsl) for p in problems for dsl in args.dsls
            if not (args.resume and row_path(out, p.problem_id, dsl, args.draws_per_trip).exists())]
    print(f"timing fidelity: {len(todo)} rows ({len(problems)} problems x {args.dsls}), {args.runs} runs each, on "
          f"{torch.cuda.get_device_name(0)}; rows land in {out}", flush=True)
    started = time.perf_counter()
    reference = {dsl: run_inprocess([(p.problem_id, str(p.solutions[dsl])) for p, d in todo if d == dsl], args.runs)
                 for dsl in args.dsls if any(d == dsl for _, d in todo)}
    print(f"in-process timing done after {time.perf_counter() - started:.0f} s", flush=True)
    with CheckerPool("cuda", spares=GPU_SPARES) as pool, tempfile.TemporaryDirectory(prefix="mkb-fid-") as cache:
        wait_for_spare(pool)
        lock = Path(cache) / "device.lock"

        def spares_warm() -> float:
            """Back-to-back judgements would each find the spare handed out before still importing torch and its
            DSL (5-10 s, beside the judgement): with --jobs 1, wait until every spare is warm, as it is after an
            agent's turn, so that the evaluation wall is the judgement's own (rows before 2026-12-05 did not)."""
            waited = time.perf_counter()
            pool.wait_warm(120.0, every=args.jobs == 1)
            return time.perf_counter() - waited

        def one_row(problem: Any, dsl: str) -> None:
            inproc = next(r for r in reference[dsl] if r["problem_id"] == problem.problem_id)
            row = {"problem_id": problem.problem_id, "dsl": dsl, "per_trip": args.draws_per_trip, "inprocess": inproc,
                   "judge": judge_runs(problem, problem.solutions[dsl], dsl, args.runs, pool, Path(cache), lock,
                                       args.draws_per_trip, between=spares_warm)}
            row_path(out, problem.problem_id, dsl, args.draws_per_trip).write_text(json.dumps(row, indent=1))
            print_table([summarise(row)])
            print(f"  ({time.perf_counter() - started:.0f} s so far)", flush=True)

        with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as workers:
            for done in [workers.submit(one_row, problem, dsl) for problem, dsl in todo]:
                done.result()
    rows = [json.loads(p.read_text()) for p in sorted(out.glob("row-*.json"))]
    summaries = [summarise(r) for r in rows]
    (out / "summary.json").write_text(json.dumps(summaries, indent=1))
    print("\n=== all rows ===")
    print_table(summaries)
    print_eval_walls(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
