"""What ran during one profiled `solve` call besides the DSL: PyTorch compute (and host code) vs glue.

- GPU: the device's own record (torch.profiler's CUPTI kernel activity). PyTorch's kernels are named after ATen
  (`at::native::...`); every other kernel the call launched is the DSL's. Glue: device-side copies (casts),
  fills, memsets. Host round trips (memcpy device↔host) are not glue: they are how host code would do the work.
- CPU target: aten operator events (their self time; glue ops excluded) and numpy calls (the profiler's Python
  tracer) are the non-DSL compute; the launch monitor's time inside the DSL's launches is the DSL's.

Every call also reports its wall-time split (inside launches vs the rest), kept as evidence: at smoke shapes the
fixed Python cost of an honest call is as large as its kernel, so that split is not a rule.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

GLUE_OPS = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "fill_", "zero_", "copy_", "to", "_to_copy", "clone", "contiguous", "detach", "alias", "lift_fresh",
    "view", "view_as", "reshape", "_reshape_alias", "_unsafe_view", "as_strided", "expand", "expand_as",
    "permute", "transpose", "t", "unsqueeze", "squeeze", "flatten", "unflatten", "select", "slice", "narrow",
    "split", "split_with_sizes", "chunk", "unbind", "resize_", "item", "_local_scalar_dense", "set_", "stride",
    "size", "numel", "is_nonzero", "new_empty", "new_zeros", "new_full", "movedim", "dim", "type_as",
    "view_as_real", "view_as_complex", "_has_compatible_shallow_copy_type", "record_stream", "arange",
}
GLUE_KERNEL_WORDS = ("copy", "fill", "memset", "memcpy dtod")  # matched in lower case (FillFunctor, Memset)
HOST_TRANSFER_WORDS = ("memcpy htod", "memcpy dtoh", "memcpy htoh")


@dataclass
class WorkEvidence:
    """One call: how its work split between the DSL and everything else (PyTorch compute, host code)."""

    source: str  # 'cupti_kernels' (GPU) | 'launch_wall_time' (CPU target)
    dsl_us: float = 0.0
    torch_compute_us: float = 0.0
    torch_glue_us: float = 0.0
    compute_ops: dict[str, int] = field(default_factory=dict)  # PyTorch compute op/kernel name -> count

    @property
    def dsl_share(self) -> float:
        total = self.dsl_us + self.torch_compute_us
        return self.dsl_us / total if total > 0 else 0.0

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "dsl_share": self.dsl_share}


def summarise(profile: Any) -> WorkEvidence:
    """Classify the device events of a finished `torch.profiler.profile` (CPU and CUDA activities)."""
    events = profile.events()
    evidence = WorkEvidence("cupti_kernels")
    for event in events:
        if "CUDA" not in str(getattr(event, "device_type", "")):
            continue
        name, duration = event.name, float(event.time_range.elapsed_us())
        lowered = name.lower()
        if any(word in lowered for word in HOST_TRANSFER_WORDS):
            evidence.torch_compute_us += duration
            evidence.compute_ops[name[:80]] = evidence.compute_ops.get(name[:80], 0) + 1
        elif any(word in lowered for word in GLUE_KERNEL_WORDS):
            evidence.torch_glue_us += duration
        elif "at::" in name or "at_cuda" in name:
            evidence.torch_compute_us += duration
            evidence.compute_ops[name[:80]] = evidence.compute_ops.get(name[:80], 0) + 1
        else:
            evidence.dsl_us += duration
    return evidence


def summarise_cpu(profile: Any, dsl_launch_us: float) -> WorkEvidence:
    """Classify the aten operators and numpy calls of a finished CPU `torch.profiler.profile(with_stack=True)`."""
    evidence = WorkEvidence("aten_ops", dsl_us=dsl_launch_us)
    for event in profile.events():
        name, self_us = event.name, float(event.self_cpu_time_total)
        if name.startswith("aten::"):
            op = name.split("::", 1)[1]
            if op in GLUE_OPS:
                evidence.torch_glue_us += self_us
                continue
        elif not ("numpy" in name and getattr(event, "is_python_function", False)):
            continue
        evidence.torch_compute_us += self_us
        evidence.compute_ops[name[:60]] = evidence.compute_ops.get(name[:60], 0) + 1
    return evidence


def wall_share(solve_us: float, launch_us: float) -> WorkEvidence:
    """The CPU target's evidence: the DSL's launches against the whole call's wall time."""
    return WorkEvidence("launch_wall_time", dsl_us=launch_us, torch_compute_us=max(solve_us - launch_us, 0.0))
