"""The typed verdict: what the judge says about one kernel. Validated from the worker's plain dict."""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

Tier = Literal["fail", "pass", "pass2x", "compile_only"]


class CheckResult(BaseModel):
    """One step of the judgement, in the order it ran; the first failing check is the reason."""

    model_config = ConfigDict(extra="forbid")
    name: str
    passed: bool
    detail: str


class CompileRecordModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dsl: str
    target: str
    seconds: float
    ptx_bytes: int
    executes: bool
    kernels: list[str] = Field(default_factory=list,
                               description="the device kernels the compile produced, by the names the profiler "
                                           "reports (evidence: what ties a profiled kernel to the DSL)")


class Roofline(BaseModel):
    """The verdict's fraction of the device's speed-of-light (mkb_ray/judge/roofline.py): the larger of achieved
    FLOP/s over peak compute and achieved bytes/s over peak bandwidth, from the sidecar's flops and bytes."""

    model_config = ConfigDict(extra="forbid")
    peaks: str = Field(description="whose peaks: e.g. 'NVIDIA H200 (SXM)'")
    flops: float
    bytes: float
    flops_kind: str = Field(description="the compute peak used: bf16_tensor, fp8_tensor, int8_tensor or fp32")
    bound: Literal["memory", "compute"] = Field(description="which fraction is the larger")
    fraction: float = Field(description="the kernel's fraction of speed-of-light (1.0 = at the roof)")
    achieved_tflops: float
    achieved_tb_s: float
    eager_fraction: Optional[float] = Field(None, description="the eager baseline's fraction, same roof")


class Verdict(BaseModel):
    """A judgement of one kernel file for one problem variant.

    `tier` is fail / pass (speedup < 2) / pass2x (speedup >= 2) for executed kernels, and `compile_only` for a GPU
    kernel judged where there is no GPU (compiled to PTX, never run: neither a pass nor a fail).
    """

    model_config = ConfigDict(extra="forbid")
    schema_version: int = 2
    problem_id: str
    problem_hash: Optional[str] = Field(None, description="sha256 of the problem file and its sidecar")
    source_hash: str = Field(description="sha256 of the kernel source")
    dsl: Literal["cutedsl", "tirx"]
    device: Literal["cpu", "cuda"]
    preset: Literal["production", "smoke", "smoke_derived"]  # what was applied (smoke_derived: no [smoke] table)
    seed: int
    protocol: Literal["mkb-ray", "mkb"] = Field(
        "mkb-ray", description="the grading protocol: this judge's, or MetaKernelBench's (no L2 flush, no outlier "
                               "draws, global tolerance rule only); see JudgeOptions")
    target: Optional[str] = Field(None, description="what the kernel was compiled for: sm_90a or llvm")
    compiled: bool
    executed: bool
    correct: Optional[bool] = Field(None, description="None when the kernel never ran")
    tier: Tier
    kernel_ms: Optional[float] = None
    kernel_min_ms: Optional[float] = None
    eager_ms: Optional[float] = None
    torch_compile_ms: Optional[float] = None
    speedup: Optional[float] = Field(None, description="eager_ms / kernel_ms; None when the timing is not resolved")
    timing_resolved: Optional[bool] = Field(
        None, description="the kernel's net time is at least a tenth of the harness's round trip (False: too close "
                          "to the harness's own time to claim a speedup; the tier is then pass)")
    rejected_by: Optional[str] = Field(None, description="the name of the check that failed")
    reason: str
    timing_method: Optional[str] = None
    timed_draws: Optional[int] = None
    device_name: Optional[str] = None
    shapes: dict[str, float] = Field(default_factory=dict)
    compile_s: float = 0.0
    compiles: list[CompileRecordModel] = Field(default_factory=list)
    launches_per_call: Optional[int] = None
    dsl_outputs_only: Optional[bool] = Field(
        None, description="every output was a buffer a DSL launch computed (False: eager code computed some; "
                          "allowed, as in MetaKernelBench, but worth knowing)")
    harness_overhead_ms: Optional[float] = Field(
        None, description="median round trip of a no-op solve, taken off kernel_ms, eager_ms and torch_compile_ms")
    kernel_roundtrip_ms: Optional[float] = Field(None, description="the kernel's median round trip before that")
    kernel_wall_ms: Optional[float] = Field(
        None, description="the checker's own clock: median round trip per draw net of the no-op's. On a GPU an upper "
                          "bound of kernel_ms (the device's record), and a floor: kernel_ms >= WALL_BOUND_RATIO of it")
    eager_wall_ms: Optional[float] = Field(None, description="the eager baseline on the checker's own clock, likewise")
    late_draws: Optional[int] = Field(
        None, description="GPU: timed draws whose device work outlived solve's return (each counted until the "
                          "device-wide wait, not until solve returned)")
    baseline_source: Optional[Literal["measured", "cached"]] = None
    baseline_drift: Optional[float] = Field(None, description="re-measured / cached eager time, when re-measured")
    roofline: Optional[Roofline] = Field(None, description="GPU verdicts with a time: fraction of speed-of-light")
    dsl_share: Optional[float] = Field(
        None, description="DSL time / (DSL + PyTorch compute time) in the median profiled call of the "
                          "judgement (device record on GPU, aten ops on CPU)")
    work_evidence: dict[str, Any] = Field(
        default_factory=dict, description="those calls' profile, times summed; profiled_calls, lowest_call_share")
    checks: list[CheckResult] = Field(default_factory=list)
    phases_s: dict[str, float] = Field(default_factory=dict, description="worker seconds per judging phase")
    worker_s: float = 0.0
    wall_s: float = Field(0.0, description="parent-side wall time, including process start")
    log_tail: str = Field("", description="the last lines the worker process printed (kernel output included)")

    @property
    def passed(self) -> bool:
        return self.tier in ("pass", "pass2x")
