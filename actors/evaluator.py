"""EvaluatorActor: the judge as a Ray actor, owning a pool of judging slots on one GPU or on CPU cores.

What it adds to `mkb_ray.judge.judge_kernel`:
- placement: one actor per GPU (`num_gpus=1`, so it never shares a GPU with a model server, unless a one-GPU host's
  config splits it: `scheduler.model_gpu_fraction`), or one actor with N CPU slots; Ray's `CUDA_VISIBLE_DEVICES`
  pins every judging process it starts to its GPU;
- a pool: at most `slots` judgements at once, each by a fresh checker and kernel process (the judge's isolation
  rule) taken from a warm `CheckerPool` (torch and the DSLs already imported) — and after a crash or CUDA error
  the slot is health-checked (a fresh CUDA context must come up) before it takes the next job;
- a baseline cache (the run directory's `baselines/`): eager and torch.compile times are measured once per
  problem, shapes, protocol and device, and re-measured now and then to track drift;
- accepting kernel *source text* (what agents produce) and returning the verdict as a JSON-able dict;
- counters (evaluations, crashes, timeouts, failed health checks) for the scheduler's progress display.
"""
from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

from mkb_ray.judge import JudgeOptions, judge_kernel
from mkb_ray.problems import ProblemSet, load_problems
from mkb_ray.judge import GPU_SPARES, CheckerPool, JudgeLimits, worker_env

# Outcomes after which the slot's device may be unhealthy: the process died or the GPU raised an error.
_SUSPECT_OUTCOMES = ("crash", "timeout", "memory_limit")


@dataclass
class EvaluatorStats:
    evaluations: int = 0
    crashes: int = 0
    timeouts: int = 0
    health_checks_failed: int = 0
    busy_slots: int = 0


class EvaluatorActor:
    """Judges kernel sources for problems under one problems root, `slots` at a time."""

    def __init__(self, device: str = "cpu", slots: int = 1, problems_root: Optional[str] = None,
                 limits: JudgeLimits = JudgeLimits(), options: JudgeOptions = JudgeOptions(),
                 baseline_cache_dir: Optional[str] = None, spares: Optional[int] = None) -> None:
        if device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
        self.device = device
        self.problems: ProblemSet = load_problems(Path(problems_root) if problems_root else None)
        self.limits = limits
        self.options = options
        self.stats = EvaluatorStats()
        self._slots = asyncio.Semaphore(slots)
        self._workdir = Path(tempfile.mkdtemp(prefix="mkb-evaluator-"))
        self.baseline_cache_dir = Path(baseline_cache_dir) if baseline_cache_dir else self._workdir / "baselines"
        # A GPU host has the cores to start checkers ahead of a fast GPU; a CPU evaluator keeps one per slot.
        if spares is None:
            spares = GPU_SPARES if device == "cuda" else slots
        self.checkers = CheckerPool(device, spares=spares)

    def _kernel_file(self, source: str) -> Path:
        # Content-addressed, so re-judging the same source reuses the file (and the judge's PTX cache).
        path = self._workdir / f"{hashlib.sha256(source.encode()).hexdigest()[:24]}.py"
        if not path.exists():
            path.write_text(source)
        return path

    async def evaluate(self, problem_id: str, kernel_source: str, dsl: str, preset: Optional[str] = None,
                       seed: Optional[int] = None) -> dict[str, Any]:
        """Judge one kernel source; returns `Verdict.model_dump(mode='json')`."""
        problem = self.problems.get(problem_id)
        kernel = self._kernel_file(kernel_source)
        async with self._slots:
            self.stats.busy_slots += 1
            try:
                verdict = await asyncio.to_thread(judge_kernel, problem, kernel, dsl, self.device, preset, seed,
                                                  self.limits, self.options, self.checkers, self.baseline_cache_dir)
            finally:
                self.stats.busy_slots -= 1
            self.stats.evaluations += 1
            suspect = verdict.rejected_by in _SUSPECT_OUTCOMES or "CUDA" in (verdict.reason or "")
            if verdict.rejected_by == "crash":
                self.stats.crashes += 1
            if verdict.rejected_by == "timeout":
                self.stats.timeouts += 1
            if suspect and not await asyncio.to_thread(self._device_healthy):
                self.stats.health_checks_failed += 1
        return verdict.model_dump(mode="json")

    def _device_healthy(self) -> bool:
        """A fresh process must be able to bring up the device before the slot is reused."""
        if self.device != "cuda":
            return True
        probe = "import torch; torch.zeros(1, device='cuda').add_(1); torch.cuda.synchronize()"
        try:
            result = subprocess.run([sys.executable, "-c", probe], env=worker_env(), timeout=120,
                                    capture_output=True)
        except subprocess.TimeoutExpired:
            return False
        return result.returncode == 0

    def get_stats(self) -> dict[str, int]:
        return asdict(self.stats)


def make_evaluator(device: str = "cpu", slots: int = 1, max_restarts: int = 0, max_task_retries: int = 0,
                   actor_options: Optional[dict[str, Any]] = None, gpu_share: float = 1.0, **kwargs: Any) -> Any:
    """Start an EvaluatorActor on Ray: a whole GPU for 'cuda', `slots` CPUs for 'cpu'. With `max_restarts`, Ray
    restarts a dead actor; with `max_task_retries`, a call in flight when it died runs again on the restarted
    actor (judging is idempotent, so the submission is simply judged again). `actor_options`: further Ray actor
    options (a role's custom resources; a name and detached lifetime for a cluster run). `gpu_share` below 1: the
    GPU is shared with a model replica that asked for the rest (one-GPU hosts)."""
    import ray

    resources = {"num_gpus": gpu_share, "num_cpus": 1} if device == "cuda" else {"num_cpus": slots}
    remote_class = ray.remote(max_concurrency=max(4, 2 * slots), max_restarts=max_restarts,
                              max_task_retries=max_task_retries, **resources)(EvaluatorActor)
    if actor_options:
        remote_class = remote_class.options(**actor_options)
    return remote_class.remote(device=device, slots=slots, **kwargs)
