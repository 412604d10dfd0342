"""`mkb problems validate`: every shipped solution through the judge, plus each problem's validity screens."""
from __future__ import annotations

import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from ..judge_worker.request import JudgeOptions, default_preset
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


def screen_problem(problem: Problem, device: str, limits: JudgeLimits) -> ValidationRow:
    request = {"problem_path": str(problem.path), "problem_id": problem.problem_id,
               "preset": default_preset(device), "device": device, "seed": secrets.randbelow(2**31)}
    outcome = run_worker({"request": request, "mode": "screen"}, limits)
    answer = outcome.payload
    if answer is None or "error" in answer:
        detail = answer["error"] if answer else f"screen worker gave no answer ({outcome.killed_for or outcome.returncode})"
        return ValidationRow(problem.problem_id, "screens", False, detail)
    checks = [CheckResult(**c) for c in answer["checks"]]
    failed = [c for c in checks if not c.passed]
    summary = "; ".join(c.detail for c in failed) if failed else f"{len(checks)} screens hold"
    return ValidationRow(problem.problem_id, "screens", not failed, summary, checks=checks)


def _solution_device(variant: str, device: str) -> str:
    """CPU-target solutions always run on the CPU; GPU solutions on `device` (compile-only without a GPU)."""
    return "cpu" if SOLUTION_VARIANTS[variant][1] == "cpu" else device


def judge_solution(problem: Problem, variant: str, device: str, limits: JudgeLimits,
                   options: JudgeOptions, pool: Optional[CheckerPool] = None,
                   baseline_cache_dir: Optional[Path] = None) -> ValidationRow:
    dsl, target = SOLUTION_VARIANTS[variant]
    verdict = judge_kernel(problem, problem.solutions[variant], dsl, _solution_device(variant, device),
                           limits=limits, options=options, pool=pool, baseline_cache_dir=baseline_cache_dir)
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
) -> list[ValidationRow]:
    """Screens and every solution of every problem (or of the problem ids in `only`), in order."""
    rows: list[ValidationRow] = []

    def emit(row: ValidationRow) -> None:
        rows.append(row)
        on_row(row)

    # Warm checkers per device the solutions run on (CPU-target solutions always on the CPU), and baselines
    # measured once per problem and device for this validation (both GPU variants share them).
    baselines = tempfile.TemporaryDirectory(prefix="mkb-validate-baselines-")
    pools = {d: CheckerPool(d, spares=1) for d in {_solution_device(v, device) for v in SOLUTION_VARIANTS}}
    for error in problems.errors:
        emit(ValidationRow(error.path, "load", False, error.message))
    for problem in problems.problems:
        if only and problem.problem_id not in only:
            continue
        refusal = problem.judging_refusal(device, gpu_arch())
        if refusal:  # nothing of it can run here: one row that says why, not four misleading failures
            emit(ValidationRow(problem.problem_id, "refused", False, refusal))
            continue
        emit(screen_problem(problem, device, limits))
        wanted = [v for v in SOLUTION_VARIANTS if SOLUTION_VARIANTS[v][0] in dsls]
        missing = [v for v in wanted if v not in problem.solutions]
        if missing:
            emit(ValidationRow(problem.problem_id, "solutions", False,
                               f"missing solutions: {', '.join(missing)} (every shipped problem needs all three)"))
        for variant in wanted:
            if variant in problem.solutions:
                emit(judge_solution(problem, variant, device, limits, options, pools.get(
                    _solution_device(variant, device)), Path(baselines.name)))
    for pool in pools.values():
        pool.close()
    baselines.cleanup()
    return rows
