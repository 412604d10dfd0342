"""What a judgement is asked to do: the one judging-options type, and the request the parent sends the worker.

Standard library only: the judging worker imports this (it runs where there is no pydantic), and the parent side
(`mkb_ray.judge`), the `mkb` command line and the evaluator actor all take their options and defaults from here.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, Optional

Device = Literal["cpu", "cuda"]
Preset = Literal["production", "smoke"]
# mkb-ray: this project's judge. mkb: MetaKernelBench's grading where ours is stricter or different — no L2 flush
# before a timed trip, no outlier draws, only the global tolerance rule (no element-wise fp8 bounds, no
# whole-tensor precision metrics); a campaign under it also counts queue wait against the attempt clock.
PROTOCOLS = ("mkb-ray", "mkb")


@dataclass(frozen=True)
class JudgeOptions:
    """How much judging to do; the defaults follow the MetaKernelBench protocol."""

    correctness_draws: int = 5          # fresh-seed draws compared with the fp64 anchor
    outlier_draws: int = 2              # draws with the sidecar's outlier inputs scaled up (KernelBenchX)
    warmup: int = 10                    # untimed draws before timing
    timed: int = 50                     # timed draws; kernel_ms is their median
    # Timed draws sent to the kernel process in one round trip (each into its own bank of the exchange), so the
    # harness's per-trip cost and jitter are spread over them; lowered to a divisor of `timed` that fits memory.
    # None: 5 on GPUs (H200, fused add + RMSNorm: pair p95 of the speedup 153 % -> 42 % for TIRx), 1 on the CPU
    # target (on 2 cores TVM's spinning worker threads slow the next draw of a trip: 102 % -> 151 %, kernel 5x
    # slower; benchmarks/results/2026-12-01-*-draws-per-trip*).
    draws_per_trip: Optional[int] = None
    # Time torch.compile of the reference too. None: on for GPUs, off on CPU (inductor's C++ build is slow there).
    compile_baseline: Optional[bool] = None
    protocol: str = "mkb-ray"           # see PROTOCOLS; the verdict names it
    skip_static_checks: bool = False    # tests only: exercise the runtime guards behind the static rules

    def resolved(self, device: str) -> "JudgeOptions":
        """These options with every `None` decided for `device`."""
        decided = {"compile_baseline": device == "cuda" if self.compile_baseline is None else self.compile_baseline,
                   "draws_per_trip": (5 if device == "cuda" else 1) if self.draws_per_trip is None
                   else self.draws_per_trip}
        if self.protocol == "mkb":
            decided["outlier_draws"] = 0  # outlier draws are KernelBenchX's, not MetaKernelBench's
        return JudgeOptions(**{**asdict(self), **decided})

    @property
    def flush_l2(self) -> bool:
        """Whether the GPU's L2 is evicted before each timed trip (MetaKernelBench's protocol does not)."""
        return self.protocol != "mkb"

    def __post_init__(self) -> None:
        for name in ("correctness_draws", "outlier_draws", "warmup"):
            if getattr(self, name) < 0:
                raise ValueError(f"JudgeOptions.{name} must be >= 0, got {getattr(self, name)}")
        if self.timed < 1:
            raise ValueError(f"JudgeOptions.timed must be >= 1, got {self.timed}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"JudgeOptions.protocol must be one of {', '.join(PROTOCOLS)}, got {self.protocol!r}")
        if self.draws_per_trip is not None and self.draws_per_trip < 1:
            raise ValueError(f"JudgeOptions.draws_per_trip must be >= 1 (or None), got {self.draws_per_trip}")


def default_preset(device: str) -> Preset:
    """Production shapes on a GPU, the problem's smoke preset on a CPU."""
    return "production" if device == "cuda" else "smoke"


@dataclass(frozen=True)
class JudgeRequest:
    """One judgement as the parent asks the worker for it (JSON on the worker's stdin)."""

    problem_id: str
    problem_path: str
    kernel_path: str
    dsl: str
    device: str = "cpu"       # 'cuda': run on the GPU (compile-only if there is none); 'cpu': this machine's CPU
    preset: str = "smoke"
    seed: int = 0
    options: JudgeOptions = field(default_factory=JudgeOptions)
    ptx_cache_dir: Optional[str] = None
    baseline_cache_dir: Optional[str] = None  # where eager/torch.compile baselines are cached (None: never)
    # Several judgements sharing one GPU: the lock file that keeps timing alone on it (device_lock.py; None: alone)
    device_lock: Optional[str] = None

    def as_json_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> "JudgeRequest":
        """The request back from `as_json_dict()`; unknown keys are an error (a parent and a worker of different
        versions must not silently disagree about what was asked)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown judge request field(s): {', '.join(unknown)}")
        values = dict(data)
        options = values.get("options") or {}
        option_names = {f.name for f in fields(JudgeOptions)}
        unknown = sorted(set(options) - option_names)
        if unknown:
            raise ValueError(f"unknown judge option(s): {', '.join(unknown)}")
        values["options"] = JudgeOptions(**options)
        return cls(**values)
