"""`mkb problems validate`: every shipped solution through the judge, plus each problem's validity screens."""
from __future__ import annotations

import secrets
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from ..checker.request import JudgeOptions, default_preset
from ..problems import SOLUTION_VARIANTS, Problem, ProblemSet
from ..records import CheckResult, Verdict
from .device import gpu_arch
from .kernel import judge_kernel
from .process import CheckerPool, JudgeLimits, run_worker


@dataclass
class ValidationRow:
    """One line of the validation table: a solution's verdict, or a problem's screens."""

    problem_id: str
    variant: str  # a solution suffix (cutedsl, tirx, tirx_cpu) or 'screens'
    ok: bool
    summary: str
    verdict: Optional[Verdict] = None
    checks: list[CheckResult] = field(default_factory=list)

    def as_json(self) -> dict:
        return {"problem_id": self.problem_id, "variant": self.variant, "ok": self.ok, "summary": self.summary,
                "verdict": self.verdict.model_dump(mode="json") if self.verdict else None,
                "checks": [c.model_dump() for c in self.checks]}


    @classmethod
    def from_json(cls, data: dict) -> "ValidationRow":
        """A row back from `as_json()` (a report being resumed)."""
        verdict = Verdict(**data["verdict"]) if data.get("verdict") else None
        return cls(data["problem_id"], data["variant"], bool(data["ok"]), data["summary"], verdict,
                   [CheckResult(**c) for c in data.get("checks") or []])


def wanted_variants(dsls: Sequence[str], targets: Sequence[str]) -> list[str]:
    """The solution variants whose DSL is in `dsls` and whose target (gpu, cpu) is in `targets`."""
    return [v for v, (dsl, target) in SOLUTION_VARIANTS.items() if dsl in dsls and target in targets]


def finished_problems(rows: Sequence[ValidationRow], variants: Sequence[str]) -> set[str]:
    """Problem ids the rows cover completely: refused, or screened and every wanted variant judged."""
    seen: dict[str, set[str]] = {}
    for row in rows:
        seen.setdefault(row.problem_id, set()).add(row.variant)
    return {pid for pid, got in seen.items() if "refused" in got or {"screens", *variants} <= got}


def screen_device(device: str) -> str:
    """Where a problem is screened: on `device`, or on the CPU where GPU solutions only compile."""
    return "cpu" if device == "cuda" and gpu_arch() is None else device


def screen_problem(problem: Problem, device: str, limits: JudgeLimits,
                   device_lock: Optional[Path] = None, pool: Optional[CheckerPool] = None) -> ValidationRow:
    """The problem's validity screens, in a checker of their own (forked from `pool`'s template when it has one
    for the screening device)."""
    device = screen_device(device)
    request = {"problem_path": str(problem.path), "problem_id": problem.problem_id,
               "preset": default_preset(device), "device": device, "seed": secrets.randbelow(2**31),
               "device_lock": str(device_lock) if device_lock else None}
    outcome = run_worker({"request": request, "mode": "screen"}, limits, pool, device)
    answer = outcome.payload
    if answer is None or "error" in answer:
        detail = (answer["error"] if answer
                  else f"screen worker gave no answer ({outcome.killed_for or outcome.returncode})")
        return ValidationRow(problem.problem_id, "screens", False, detail)
    checks = [CheckResult(**c) for c in answer["checks"]]
    failed = [c for c in checks if not c.passed]
    summary = "; ".join(c.detail for c in failed) if failed else f"{len(checks)} screens hold"
    return ValidationRow(problem.problem_id, "screens", not failed, summary, checks=checks)


def _pool_key(variant: str, device: str) -> tuple[str, str]:
    return _solution_device(variant, device), SOLUTION_VARIANTS[variant][0]


def _solution_device(variant: str, device: str) -> str:
    """CPU-target solutions always run on the CPU; GPU solutions on `device` (compile-only without a GPU)."""
    return "cpu" if SOLUTION_VARIANTS[variant][1] == "cpu" else device


def judge_solution(problem: Problem, variant: str, device: str, limits: JudgeLimits,
                   options: JudgeOptions, pool: Optional[CheckerPool] = None,
                   baseline_cache_dir: Optional[Path] = None, device_lock: Optional[Path] = None) -> ValidationRow:
    dsl, target = SOLUTION_VARIANTS[variant]
    verdict = judge_kernel(problem, problem.solutions[variant], dsl, _solution_device(variant, device),
                           limits=limits, options=options, pool=pool, baseline_cache_dir=baseline_cache_dir,
                           device_lock=device_lock)
    if verdict.executed:
        ok = verdict.passed
    else:
        # Without a GPU the only honest expectation for a GPU solution is that it compiles to PTX.
        ok = target == "gpu" and verdict.tier == "compile_only" and verdict.compiled
    return ValidationRow(problem.problem_id, variant, ok, verdict.reason, verdict=verdict, checks=verdict.checks)


def validate(
    problems: ProblemSet,
    device: str,
    dsls: Sequence[str] = ("cutedsl", "tirx"),
    limits: JudgeLimits = JudgeLimits(),
    options: JudgeOptions = JudgeOptions(),
    on_row: Callable[[ValidationRow], None] = lambda row: None,
    only: Optional[Sequence[str]] = None,
    jobs: int = 1,
    targets: Sequence[str] = ("gpu", "cpu"),
) -> list[ValidationRow]:
    """Screens and every solution of every problem (or of the problem ids in `only`) whose DSL is in `dsls` and
    target in `targets`, rows in problem order. `jobs` > 1 validates that many problems at once (each shard with
    its own warm checkers). On a GPU the shards share one device lock: compiles and correctness overlap, timing
    is alone on the device. CPU-target timings share the cores: record those with one job."""
    chosen = [p for p in problems.problems if not only or p.problem_id in only]
    variants = wanted_variants(dsls, targets)
    load_rows = [ValidationRow(error.path, "load", False, error.message) for error in problems.errors]
    for row in load_rows:
        on_row(row)
    shards = [shard for shard in (chosen[i::max(1, jobs)] for i in range(max(1, jobs))) if shard]
    lock = threading.Lock()
    lock_dir = tempfile.TemporaryDirectory(prefix="mkb-validate-device-")
    device_lock = Path(lock_dir.name) / "device.lock" if device == "cuda" and len(shards) > 1 else None

    def locked(row: ValidationRow) -> None:
        with lock:
            on_row(row)

    with lock_dir:
        if len(shards) <= 1:
            by_problem = _validate_shard(shards[0], device, variants, limits, options, on_row) if shards else {}
        else:
            with ThreadPoolExecutor(max_workers=len(shards)) as pool:
                results = list(pool.map(lambda shard: _validate_shard(shard, device, variants, limits, options,
                                                                      locked, device_lock), shards))
            by_problem = {pid: rows for result in results for pid, rows in result.items()}
            # Shards share the device's memory: a problem that ran out of it beside another shard's is validated
            # again alone (measured: attention/17 and /18 at --jobs 2 on an 80 GB H100), so that the report blames
            # a solution only for what it does on a device of its own.
            starved = [p for p in chosen if short_of_device_memory(by_problem[p.problem_id])]
            if starved:
                by_problem.update(_validate_shard(starved, device, variants, limits, options,
                                                  lambda row: locked(_marked_alone(row))))
    return load_rows + [row for p in chosen for row in by_problem[p.problem_id]]


def short_of_device_memory(rows: Sequence[ValidationRow]) -> bool:
    """Did one of a problem's rows fail because the GPU ran out of memory (CUDA's own message)?"""
    return any(not row.ok and "out of memory" in row.summary.lower() and "cuda" in row.summary.lower()
               for row in rows)


def _marked_alone(row: ValidationRow) -> ValidationRow:
    row.summary = f"{row.summary} (validated alone: it ran out of device memory beside another job)"
    return row


def _validate_shard(chosen: Sequence[Problem], device: str, wanted: Sequence[str], limits: JudgeLimits,
                    options: JudgeOptions, on_row: Callable[[ValidationRow], None],
                    device_lock: Optional[Path] = None) -> dict[str, list[ValidationRow]]:
    """validate() for some problems, in order, with warm checkers of its own; rows by problem id."""
    out: dict[str, list[ValidationRow]] = {}

    def emit(problem: Problem, row: ValidationRow) -> None:
        out.setdefault(problem.problem_id, []).append(row)
        on_row(row)

    # Warm checkers per device the solutions run on (CPU-target solutions always on the CPU) and DSL (a kernel
    # process then imports one DSL, not both), and baselines measured once per problem and device for this
    # validation (both GPU variants share them).
    baselines = tempfile.TemporaryDirectory(prefix="mkb-validate-baselines-")
    pools = {key: CheckerPool(key[0], spares=1, dsls=(key[1],)) for key in {_pool_key(v, device) for v in wanted}}
    screen_pool = next((pool for (pool_device, _), pool in pools.items() if pool_device == screen_device(device)),
                       None)
    try:
        for problem in chosen:
            refusal = problem.judging_refusal(device, gpu_arch())
            if refusal:  # nothing of it can run here: one row that says why, not four misleading failures
                emit(problem, ValidationRow(problem.problem_id, "refused", False, refusal))
                continue
            emit(problem, screen_problem(problem, device, limits, device_lock, screen_pool))
            missing = [v for v in wanted if v not in problem.solutions]
            if missing:
                emit(problem, ValidationRow(problem.problem_id, "solutions", False,
                                            f"missing solutions: {', '.join(missing)} (every shipped problem needs "
                                            f"all three)"))
            for variant in wanted:
                if variant in problem.solutions:
                    emit(problem, judge_solution(problem, variant, device, limits, options,
                                                 pools.get(_pool_key(variant, device)), Path(baselines.name),
                                                 device_lock))
    finally:
        for pool in pools.values():
            pool.close()
        baselines.cleanup()
    return out
