"""The judge's one entry point: a kernel file in, a typed `Verdict` out.

Each submission runs in a fresh judging process (`mkb_ray.worker_process`) under a hard wall-clock timeout and a
resident-memory limit. A worker that dies, hangs or balloons is itself the verdict: `crash`, `timeout` or
`memory_limit`.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

from .problems import Problem
from .verdict import CheckResult, Verdict
from .worker_process import JudgeLimits, run_worker


@dataclass(frozen=True)
class JudgeOptions:
    """How much judging to do; defaults follow the MetaKernelBench protocol."""

    correctness_draws: int = 5
    outlier_draws: int = 2
    warmup: int = 10
    timed: int = 50
    compile_baseline: Optional[bool] = None  # default: on for GPUs, off on CPU (inductor's C++ build is slow there)
    skip_static_checks: bool = False  # tests only


def default_preset(device: str) -> Literal["production", "smoke"]:
    return "production" if device == "cuda" else "smoke"


def ptx_cache_dir() -> Path:
    base = Path(os.environ.get("MKB_CACHE_DIR", Path.home() / ".cache" / "mkb-ray"))
    return base / "ptx"


def judge_kernel(
    problem: Problem,
    kernel_path: Path,
    dsl: str,
    device: str = "cpu",
    preset: Optional[str] = None,
    seed: Optional[int] = None,
    limits: JudgeLimits = JudgeLimits(),
    options: JudgeOptions = JudgeOptions(),
) -> Verdict:
    """Judge `kernel_path` as a `dsl` solution of `problem` on `device` ('cuda' or 'cpu')."""
    kernel_path = Path(kernel_path).resolve()
    request = {
        "problem_id": problem.problem_id,
        "problem_path": str(problem.path.resolve()),
        "kernel_path": str(kernel_path),
        "dsl": dsl,
        "device": device,
        "preset": preset or default_preset(device),
        "seed": seed if seed is not None else secrets.randbelow(2**31),
        "correctness_draws": options.correctness_draws,
        "outlier_draws": options.outlier_draws,
        "warmup": options.warmup,
        "timed": options.timed,
        "compile_baseline": options.compile_baseline if options.compile_baseline is not None else device == "cuda",
        "skip_static_checks": options.skip_static_checks,
        "ptx_cache_dir": str(ptx_cache_dir()),
    }
    outcome = run_worker({"request": request, "mode": "judge"}, limits)
    payload, killed_for, wall_s, log_tail = outcome.payload, outcome.killed_for, outcome.wall_s, outcome.log_tail
    if payload is not None and killed_for is None:
        return Verdict(**payload, wall_s=wall_s, log_tail=log_tail)
    if killed_for == "timeout":
        failure = ("timeout", f"killed after the {limits.timeout_s:.0f} s limit (compile + judging)")
    elif killed_for == "memory_limit":
        failure = ("memory_limit", f"killed: resident memory exceeded {limits.memory_mb} MiB")
    else:
        code = outcome.returncode
        how = f"signal {-code} ({signal.Signals(-code).name})" if code and code < 0 else f"exit code {code}"
        failure = ("crash", f"the judging process died ({how}) before producing a verdict")
    return _failure_verdict(request, kernel_path, failure[0], failure[1], wall_s, log_tail)


def _failure_verdict(request: dict, kernel_path: Path, check: str, reason: str, wall_s: float, log_tail: str) -> Verdict:
    try:
        source_hash = hashlib.sha256(kernel_path.read_bytes()).hexdigest()
    except OSError:
        source_hash = ""
    return Verdict(
        problem_id=request["problem_id"], source_hash=source_hash, dsl=request["dsl"], device=request["device"],
        preset=request["preset"], seed=request["seed"], compiled=False, executed=False, tier="fail",
        rejected_by=check, reason=reason, checks=[CheckResult(name=check, passed=False, detail=reason)],
        wall_s=wall_s, log_tail=log_tail)
