"""How much of an evaluation's wall time is useful work, before and after the judge re-architecture?

Judges the same list of (problem, shipped solution) pairs with two judges, back to back in one run, using the
production protocol (JudgeOptions defaults; preset `production` on cuda, `smoke` on cpu):

  old     the judge of commit 424bdca, exported to --old-tree (scripts/export-old-judge.sh): one fresh
          `python -m mkb_ray.judge_worker` per evaluation, the candidate running next to the checker, the eager
          (and on a GPU the torch.compile) baseline measured inside every evaluation. Driven through that tree's
          own parent side (its mkb_ray/judge/process.py run_worker and request types): the old code end to end.
  new     this checkout's `judge_kernel` with one warm `CheckerPool(device, spares=--spares)` for the whole run (a
          spare checker and its sandboxed kernel process are started ahead) and one fresh temporary baseline cache.
          The new path goes over the list three times: pass 1 measures each problem's baselines the first time it
          sees that problem (later pairs of the same problem already hit the cache), pass 2 finds them all cached;
          both back to back, so a spare started after the judgement before it (the pool never starts one beside
          timed draws) may still be starting when it is taken. Pass 3 (cached) waits before each submission, off
          the clock, until the pool's spare says it is warm: the latency an agent sees when its turn between two
          submissions outlasts a checker's start. Rows are split by what each verdict says (`baseline_source`):
          "new (baselines measured)", "new (baselines cached)", "new (cached, warm spare)", plus "new (pass 1)"
          = what a fresh run directory sees.

Per evaluation:
  wall      perf_counter around the judge call, in this process (process start, imports, checks, baselines,
            pipes, verdict parsing: everything an evaluator waits for)
  useful    compile_s + phases_s["timing_kernel"]: the DSL compile plus the kernel's timed loop (warm-up + timed
            draws, with the re-checks and audits that run inside it), the same definition for both judges
  overhead  wall - useful

Per row: median wall, median useful, median overhead, ratio = median wall / median useful, evaluations per
minute = count / sum of walls x 60 (one evaluator, judging back to back), pass count (tier pass or pass2x).
A second table says where the time went: median seconds per phase of the judging process (its phases_s) and
`outside` = wall - worker_s (process start and imports not hidden by the pool, pipes, verdict parsing).
Targets (issue 9): median wall <= median useful + 1.5 s on a GPU (+ 1 s on a CPU); >= 20 evaluations per minute
on one H200. Missed targets are reported, not an error: the exit status is 0 whenever the run completed.

    python benchmarks/evaluator_overhead.py --device cpu --evaluations 2    # quick look (~2 min on 2 cores)
    python benchmarks/evaluator_overhead.py --device cpu                    # all 12 tirx_cpu solutions
    python benchmarks/evaluator_overhead.py --out benchmarks/results/DATE-h200-overhead.txt   # on a GPU host

Default list: every shipped solution once per pass, `problems/*/solutions/*.tirx_cpu.py` (dsl tirx) on cpu,
`*.cutedsl.py` (dsl cutedsl) and `*.tirx.py` (dsl tirx) on cuda; --evaluations N takes the first N (cycling
through the list again when N is larger). On a GPU host without git history, export the old tree here first
(bash scripts/export-old-judge.sh) and carry .old-judge with the working tree. Timings on a shared machine are
noisy: compare rows of one run, not runs.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Optional

REPO = Path(__file__).resolve().parents[1]
EXPORT_SCRIPT = REPO / "scripts" / "export-old-judge.sh"
OLD_COMMIT = "424bdca"
VARIANTS = {"cpu": ("tirx_cpu",), "cuda": ("cutedsl", "tirx")}
TARGET_EXTRA_S = {"cuda": 1.5, "cpu": 1.0}
TARGET_PER_MINUTE = 20.0
PASSING = ("pass", "pass2x")


@dataclass
class Pair:
    problem_id: str
    variant: str
    dsl: str
    kernel_path: Path
    seed: int


@dataclass
class Evaluation:
    path: str  # 'old' | 'new'
    pass_no: int
    problem_id: str
    dsl: str
    seed: int
    tier: str
    reason: str
    wall_s: float
    compile_s: float
    timing_kernel_s: float
    worker_s: float = 0.0
    baseline_source: Optional[str] = None
    phases_s: dict[str, float] = field(default_factory=dict)

    @property
    def useful_s(self) -> float:
        return self.compile_s + self.timing_kernel_s

    @property
    def overhead_s(self) -> float:
        return self.wall_s - self.useful_s


class Report:
    """Prints, and keeps what was printed for --out."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        self.lines.append(line)


# --- the old judge, from the exported tree ---------------------------------------------------------------------

def _load_file(name: str, path: Path) -> ModuleType:
    """Import one file of the old tree under a private module name (the old and the new `mkb_ray` cannot share
    this interpreter). The modules loaded this way are standard library (+ psutil) only."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def ensure_old_tree(old_tree: Path) -> Path:
    if (old_tree / "mkb_ray" / "judge_worker" / "__main__.py").exists():
        return old_tree
    if shutil.which("git") and (REPO / ".git").exists():
        print(f"{old_tree} has no old judge; exporting {OLD_COMMIT} with {EXPORT_SCRIPT.relative_to(REPO)}",
              flush=True)
        subprocess.run(["bash", str(EXPORT_SCRIPT), OLD_COMMIT, str(old_tree)], check=True)
        return old_tree
    raise SystemExit(f"no old judge under {old_tree} and no git history here to export it from: run "
                     f"`bash scripts/export-old-judge.sh` where there is, and carry the directory")


class OldJudge:
    """The old judge's parent side, as its own `judge_kernel` did it, less the pydantic Verdict."""

    def __init__(self, old_tree: Path) -> None:
        self.tree = old_tree.resolve()
        self.process = _load_file("_old_judge_process", self.tree / "mkb_ray" / "judge" / "process.py")
        self.request = _load_file("_old_judge_request", self.tree / "mkb_ray" / "judge_worker" / "request.py")
        commit_file = self.tree / "COMMIT"
        self.commit = commit_file.read_text().strip() if commit_file.exists() else "unknown"
        self.check_imports_old_tree()

    def check_imports_old_tree(self) -> None:
        """The worker must import the exported package, not this checkout's (an editable install could win)."""
        env = self.process.worker_env()
        probe = "import mkb_ray.judge_worker.pipeline as p; print(p.__file__)"
        with tempfile.TemporaryDirectory(prefix="mkb-old-probe-") as scratch:  # also warms the page cache
            found = subprocess.run([sys.executable, "-c", probe], env=env, cwd=scratch, capture_output=True,
                                   text=True, check=True).stdout.strip()
        if not Path(found).resolve().is_relative_to(self.tree):
            raise SystemExit(f"the old worker would import {found}, not the tree under {self.tree}")

    def judge(self, pair: Pair, problem: Any, device: str, preset: str) -> dict[str, Any]:
        from mkb_ray.judge import ptx_cache_dir

        request = self.request.JudgeRequest(
            problem_id=problem.problem_id, problem_path=str(problem.path.resolve()),
            kernel_path=str(pair.kernel_path.resolve()), dsl=pair.dsl, device=device, preset=preset,
            seed=pair.seed, options=self.request.JudgeOptions().resolved(device), ptx_cache_dir=str(ptx_cache_dir()))
        limits = self.process.JudgeLimits()
        outcome = self.process.run_worker({"request": request.as_json_dict(), "mode": "judge"}, limits)
        if outcome.payload is not None and outcome.killed_for is None:
            return outcome.payload
        what = outcome.killed_for or f"crash (exit code {outcome.returncode})"
        return {"tier": "fail", "reason": f"old judge: {what}; log: {outcome.log_tail[-300:]}", "compile_s": 0.0,
                "phases_s": {}}


# --- the new judge -----------------------------------------------------------------------------------------------

def wait_for_spare(pool: Any, timeout_s: float = 120.0) -> float:
    """Wait until the pool's next spare checker says it is warm (its imports and its kernel process's done: the
    checker's own signal, CheckerPool.wait_warm). Returns the seconds waited."""
    started = time.perf_counter()
    pool.wait_warm(timeout_s)
    return time.perf_counter() - started


# --- the run -----------------------------------------------------------------------------------------------------

def shipped_pairs(device: str) -> list[tuple[Any, str, str, Path]]:
    from mkb_ray.problems import SOLUTION_VARIANTS, load_problems

    pairs = []
    for problem in load_problems().problems:
        for variant in VARIANTS[device]:
            if variant in problem.solutions:
                pairs.append((problem, variant, SOLUTION_VARIANTS[variant][0], problem.solutions[variant]))
    return pairs


def record(path: str, pass_no: int, pair: Pair, verdict: dict[str, Any], wall_s: float) -> Evaluation:
    phases = {k: float(v) for k, v in (verdict.get("phases_s") or {}).items() if isinstance(v, (int, float))}
    return Evaluation(
        path=path, pass_no=pass_no, problem_id=pair.problem_id, dsl=pair.dsl, seed=pair.seed,
        tier=str(verdict.get("tier")), reason=str(verdict.get("reason") or "")[:300], wall_s=wall_s,
        compile_s=float(verdict.get("compile_s") or 0.0), timing_kernel_s=phases.get("timing_kernel", 0.0),
        worker_s=float(verdict.get("worker_s") or 0.0), baseline_source=verdict.get("baseline_source"),
        phases_s=phases)


def run_pass(say: Report, label: str, path: str, pass_no: int, pairs: list[Pair],
             judge: Callable[[Pair], dict[str, Any]],
             between: Optional[Callable[[], float]] = None) -> list[Evaluation]:
    """Judge `pairs` in order. `between`, when given, runs before each judgement, off the clock (the agent's turn
    between two submissions); what it returns (seconds) is printed as `think`."""
    evaluations = []
    for index, pair in enumerate(pairs, 1):
        think = f"  think {between():5.2f}" if between is not None else ""
        started = time.perf_counter()
        verdict = judge(pair)
        wall_s = time.perf_counter() - started
        evaluation = record(path, pass_no, pair, verdict, wall_s)
        evaluations.append(evaluation)
        base = f" baselines {evaluation.baseline_source}" if evaluation.baseline_source else ""
        say(f"  {label:6} {index:>3}/{len(pairs)} {pair.problem_id:38} {pair.dsl:8} {evaluation.tier:12} "
            f"wall {wall_s:6.2f}  useful {evaluation.useful_s:6.2f}  "
            f"overhead {evaluation.overhead_s:6.2f}{base}{think}")
        if evaluation.tier not in PASSING and evaluation.tier != "compile_only":
            say(f"         {evaluation.reason[:200]}")
    return evaluations


def summarize(name: str, evaluations: list[Evaluation]) -> dict[str, Any]:
    walls = [e.wall_s for e in evaluations]
    useful = [e.useful_s for e in evaluations]
    median_wall, median_useful = statistics.median(walls), statistics.median(useful)
    return {
        "row": name, "count": len(evaluations), "median_wall_s": median_wall, "median_useful_s": median_useful,
        "median_overhead_s": statistics.median(e.overhead_s for e in evaluations),
        "ratio": median_wall / median_useful if median_useful > 0 else None,
        "per_minute": len(evaluations) / sum(walls) * 60 if sum(walls) > 0 else None,
        "passed": sum(e.tier in PASSING for e in evaluations),
        "tiers": {t: sum(e.tier == t for e in evaluations) for t in sorted({e.tier for e in evaluations})},
        "total_wall_s": sum(walls),
    }


def print_table(say: Report, rows: list[dict[str, Any]], device: str) -> None:
    extra = TARGET_EXTRA_S[device]
    say(f"{'row':28} {'n':>3} {'wall':>7} {'useful':>7} {'overhead':>8} {'ratio':>6} {'eval/min':>8} {'pass':>5}"
        f"  wall<=useful+{extra:g}s")
    for row in rows:
        ratio = f"{row['ratio']:6.1f}" if row["ratio"] is not None else f"{'-':>6}"
        per_minute = f"{row['per_minute']:8.1f}" if row["per_minute"] is not None else f"{'-':>8}"
        met = "met" if row["median_wall_s"] <= row["median_useful_s"] + extra else "missed"
        row["wall_target_met"] = met == "met"
        say(f"{row['row']:28} {row['count']:>3} {row['median_wall_s']:7.2f} {row['median_useful_s']:7.2f} "
            f"{row['median_overhead_s']:8.2f} {ratio} {per_minute} {row['passed']:>2}/{row['count']:<2}  {met}")


def print_phases(say: Report, groups: list[tuple[str, list[Evaluation]]]) -> None:
    names: list[str] = []
    for _, evaluations in groups:
        for evaluation in evaluations:
            names += [n for n in evaluation.phases_s if n not in names and n != "useful"]
    say(f"{'row':28} {'outside':>8}" + "".join(f" {n[:16]:>16}" for n in names))
    for row_name, evaluations in groups:
        cells = [statistics.median(e.wall_s - e.worker_s for e in evaluations)]
        cells += [statistics.median(e.phases_s.get(n, 0.0) for e in evaluations) for n in names]
        say(f"{row_name:28} {cells[0]:8.2f}" + "".join(f" {c:16.2f}" for c in cells[1:]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default=None,
                        help="where to judge (default: cuda if torch sees a GPU, else cpu)")
    parser.add_argument("--old-tree", type=Path, default=REPO / ".old-judge",
                        help="the exported old judge (default .old-judge; exported with scripts/export-old-judge.sh "
                             "when missing and git history is here)")
    parser.add_argument("--evaluations", type=int, default=None, metavar="N",
                        help="judge the first N pairs of the list per pass (default: every shipped solution once)")
    parser.add_argument("--problem", action="append", default=None, metavar="ID",
                        help="judge only this problem's shipped solutions (repeatable; default: every problem)")
    parser.add_argument("--spares", type=int, default=None, metavar="N",
                        help="checkers the new judge keeps started ahead (default: 6 on cuda, where starting one "
                             "takes longer than judging; 1 on cpu)")
    parser.add_argument("--out", type=Path, default=None, metavar="FILE",
                        help="also write what is printed to FILE and a JSON summary (every evaluation too) to "
                             "FILE with the suffix .json")
    args = parser.parse_args()

    from mkb_ray.judge import GPU_SPARES, CheckerPool, JudgeOptions, default_preset, detect_gpu, judge_kernel

    has_gpu = detect_gpu()
    device = args.device or ("cuda" if has_gpu else "cpu")
    preset = default_preset(device)
    spares = args.spares if args.spares is not None else (GPU_SPARES if device == "cuda" else 1)
    old = OldJudge(ensure_old_tree(args.old_tree))
    listed = shipped_pairs(device)
    if args.problem:
        unknown = set(args.problem) - {p.problem_id for p, *_ in listed}
        if unknown:
            raise SystemExit(f"--problem: no shipped {device} solutions for {', '.join(sorted(unknown))}")
        listed = [entry for entry in listed if entry[0].problem_id in args.problem]
    count = len(listed) if args.evaluations is None else args.evaluations
    if count < 1:
        raise SystemExit("--evaluations must be >= 1")
    pairs = [Pair(p.problem_id, variant, dsl, kernel, secrets.randbelow(2**31))
             for p, variant, dsl, kernel in (listed[i % len(listed)] for i in range(count))]
    problems = {p.problem_id: p for p, *_ in listed}
    options = JudgeOptions()

    say = Report()
    say(f"evaluator overhead: device={device} preset={preset} options={asdict(options.resolved(device))}")
    say(f"old: {old.commit[:12]} from {old.tree} (fresh worker per evaluation); new: this checkout "
        f"(CheckerPool spares={spares}, fresh baseline cache); {count} evaluation(s) per pass; "
        f"host {platform.node()}, {os.cpu_count()} CPUs{'' if has_gpu or device == 'cpu' else ', NO GPU'}")
    if device == "cuda" and not has_gpu:
        say("warning: --device cuda without a GPU here: verdicts will be compile_only, useful = compile only")
    say("order: old pass, then new pass 1 (baselines measured at a problem's first sight), then new pass 2 "
        "(cached), back to back, then new pass 3 (cached, each submission after the spare is warm); each pair has "
        "one seed, shared by all passes")

    started = time.perf_counter()
    say("\nold judge:")
    old_evals = run_pass(say, "old", "old", 1, pairs, lambda pair: old.judge(pair, problems[pair.problem_id],
                                                                             device, preset))
    with (tempfile.TemporaryDirectory(prefix="mkb-baselines-") as cache_dir,
          CheckerPool(device, spares=spares) as pool):
        waited = wait_for_spare(pool)
        say(f"\nnew judge (pool warm after {waited:.1f} s, baseline cache {cache_dir}):")

        def new_judge(pair: Pair) -> dict[str, Any]:
            verdict = judge_kernel(problems[pair.problem_id], pair.kernel_path, pair.dsl, device, preset=preset,
                                   seed=pair.seed, options=options, pool=pool, baseline_cache_dir=Path(cache_dir))
            return verdict.model_dump()

        new_evals = run_pass(say, "new/1", "new", 1, pairs, new_judge)
        new_evals += run_pass(say, "new/2", "new", 2, pairs, new_judge)
        say("\nnew judge, pass 3 (cached; each submission waits, off the clock, until the pool's spare is warm):")
        warm_evals = run_pass(say, "new/3", "new", 3, pairs, new_judge, between=lambda: wait_for_spare(pool))
    total_s = time.perf_counter() - started

    def new_where(source: str) -> list[Evaluation]:
        # Rejected before timing: no baseline_source; then pass 1 counts as measured, pass 2 as cached.
        return [e for e in new_evals if (e.baseline_source or ("measured" if e.pass_no == 1 else "cached")) == source]

    groups = [("old (fresh process each)", old_evals), ("new (baselines measured)", new_where("measured")),
              ("new (baselines cached)", new_where("cached")), ("new (cached, warm spare)", warm_evals)]
    first_pass = [e for e in new_evals if e.pass_no == 1]
    if first_pass != groups[1][1]:  # some pass-1 pairs met a problem already measured (two DSLs per problem)
        groups.append(("new (pass 1)", first_pass))
    groups = [(name, evaluations) for name, evaluations in groups if evaluations]
    rows = [summarize(name, evaluations) for name, evaluations in groups]
    say(f"\nmedians per evaluation, seconds (useful = compile_s + phases_s['timing_kernel']; "
        f"overhead = wall - useful; ratio = median wall / median useful; run took {total_s:.0f} s):")
    print_table(say, rows, device)
    say("\nwhere the time went: median seconds per phase (outside = wall - worker_s: process start and imports not "
        "hidden by the pool, pipes, verdict parsing):")
    print_phases(say, groups)
    say(f"\ntargets (issue 9): median wall <= useful + 1.5 s (GPU) / + 1 s (CPU); >= {TARGET_PER_MINUTE:g} "
        f"evaluations per minute on one H200" + (" (the throughput target is for a GPU; on cpu it is shown only)"
                                                 if device == "cpu" else ""))
    say("back to back (passes 1-2) a spare starts only after the judgement before it (never beside timed draws), "
        "so its start is on the clock; pass 3 is the latency an agent sees when its turn outlasts a spare's start")
    for row in rows:
        if device == "cuda" and row["per_minute"] is not None:
            row["throughput_target_met"] = row["per_minute"] >= TARGET_PER_MINUTE
    for row_name in ("new (baselines cached)", "new (cached, warm spare)"):
        cached = next((r for r in rows if r["row"] == row_name), None)
        if cached is None:
            continue
        verdict_wall = "met" if cached["wall_target_met"] else "missed"
        line = (f"{row_name}: median wall {cached['median_wall_s']:.2f} s vs useful "
                f"{cached['median_useful_s']:.2f} s + {TARGET_EXTRA_S[device]:g} s: {verdict_wall}")
        if device == "cuda":
            line += (f"; {cached['per_minute']:.1f} evaluations/min vs {TARGET_PER_MINUTE:g}: "
                     f"{'met' if cached['throughput_target_met'] else 'missed'}")
        say(line)

    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(say.lines) + "\n")
        json_path = args.out.with_suffix(".json") if args.out.suffix != ".json" else args.out.with_suffix(".out.json")
        summary = {
            "device": device, "preset": preset, "options": asdict(options.resolved(device)),
            "old_commit": old.commit, "host": platform.node(), "cpus": os.cpu_count(), "has_gpu": has_gpu,
            "evaluations_per_pass": count, "total_s": total_s, "rows": rows,
            "targets": {"median_wall_extra_s": TARGET_EXTRA_S[device], "per_minute_h200": TARGET_PER_MINUTE},
            "evaluations": [{**asdict(e), "useful_s": e.useful_s, "overhead_s": e.overhead_s}
                            for e in old_evals + new_evals + warm_evals],
        }
        json_path.write_text(json.dumps(summary, indent=2, default=str) + "\n")
        print(f"wrote {args.out} and {json_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
