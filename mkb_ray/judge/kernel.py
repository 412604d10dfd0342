"""The judge's one entry point: a kernel file in, a typed `Verdict` out.

Each submission is judged by a fresh checker process (`mkb_ray.judge.process`, from a warm `CheckerPool` when
one is given), which runs the candidate in its own sandboxed kernel process (`mkb_ray.checker.pipeline`),
under a hard wall-clock timeout and a resident-memory limit. A checker that dies, hangs or balloons is itself
the verdict: `crash`, `timeout` or `memory_limit`.
"""
from __future__ import annotations

import hashlib
import secrets
import signal
from pathlib import Path
from typing import Optional

from ..checker.request import JudgeOptions, JudgeRequest, default_preset
from ..problems import Problem
from ..records import CheckResult, Verdict
from .device import gpu_arch, ptx_cache_dir
from .process import CheckerPool, JudgeLimits, run_worker
from .roofline import roofline


class JudgingRefused(ValueError):
    """The problem cannot be judged on this machine (see Problem.judging_refusal): no verdict, no submission spent."""


def judge_kernel(
    problem: Problem,
    kernel_path: Path,
    dsl: str,
    device: str = "cpu",
    preset: Optional[str] = None,
    seed: Optional[int] = None,
    limits: JudgeLimits = JudgeLimits(),
    options: JudgeOptions = JudgeOptions(),
    pool: Optional[CheckerPool] = None,
    baseline_cache_dir: Optional[Path] = None,
    device_lock: Optional[Path] = None,
) -> Verdict:
    """Judge `kernel_path` as a `dsl` solution of `problem` on `device` ('cuda' or 'cpu').

    `baseline_cache_dir` (a run directory's, typically) caches the eager/torch.compile baselines per problem,
    shapes, protocol and device; None measures them for every judgement. Raises JudgingRefused when the problem
    cannot be judged here at all (a make_inputs() pinned to CUDA on a machine without a GPU, an sm_100a problem on
    Hopper): a verdict would blame the kernel for the machine. `device_lock`: the lock file of judgements sharing
    this GPU (mkb_ray/checker/device_lock.py), so that each one times alone."""
    refusal = problem.judging_refusal(device, gpu_arch())
    if refusal:
        raise JudgingRefused(refusal)
    kernel_path = Path(kernel_path).resolve()
    request = JudgeRequest(
        problem_id=problem.problem_id, problem_path=str(problem.path.resolve()), kernel_path=str(kernel_path),
        dsl=dsl, device=device, preset=preset or default_preset(device),
        seed=seed if seed is not None else secrets.randbelow(2**31), options=options.resolved(device),
        ptx_cache_dir=str(ptx_cache_dir()),
        baseline_cache_dir=str(Path(baseline_cache_dir).resolve()) if baseline_cache_dir else None,
        device_lock=str(device_lock) if device_lock else None)
    outcome = run_worker({"request": request.as_json_dict(), "mode": "judge"}, limits, pool, device)
    payload, killed_for, wall_s, log_tail = outcome.payload, outcome.killed_for, outcome.wall_s, outcome.log_tail
    if payload is not None and killed_for is None:
        kernel_log = str(payload.pop("log_tail", "") or "")
        verdict = Verdict(**payload, wall_s=wall_s, log_tail=(log_tail + kernel_log)[-8000:])
        if verdict.device == "cuda" and verdict.executed:
            side = problem.sidecar
            verdict.roofline = roofline(side.flops, side.bytes, side.flops_kind, verdict.shapes, verdict.kernel_ms,
                                        verdict.eager_ms, verdict.device_name)
        return verdict
    if killed_for == "timeout":
        failure = ("timeout", f"killed after the {limits.timeout_s:.0f} s limit (compile + judging)")
    elif killed_for == "memory_limit":
        failure = ("memory_limit", f"killed: resident memory exceeded {limits.memory_mb} MiB")
    else:
        code = outcome.returncode
        how = f"signal {-code} ({signal.Signals(-code).name})" if code and code < 0 else f"exit code {code}"
        failure = ("crash", f"the judging process died ({how}) before producing a verdict")
    return _failure_verdict(request, kernel_path, failure[0], failure[1], wall_s, log_tail)


def _failure_verdict(request: JudgeRequest, kernel_path: Path, check: str, reason: str, wall_s: float,
                     log_tail: str) -> Verdict:
    try:
        source_hash = hashlib.sha256(kernel_path.read_bytes()).hexdigest()
    except OSError:
        source_hash = ""
    return Verdict(
        problem_id=request.problem_id, source_hash=source_hash, dsl=request.dsl, device=request.device,
        preset=request.preset, seed=request.seed, protocol=request.options.protocol, compiled=False, executed=False,
        tier="fail",
        rejected_by=check, reason=reason, checks=[CheckResult(name=check, passed=False, detail=reason)],
        wall_s=wall_s, log_tail=log_tail)
