"""What ran besides the DSL during one `solve` call, read from torch's profiler: PyTorch compute vs glue.

On the GPU the profiler's device activity (CUPTI) lists every kernel that ran: PyTorch's own kernels are named
after ATen (`at::native::...`), everything else that the call launched is the DSL's. On the CPU target there is
no device record, so aten operator events stand in for it: their self time is PyTorch compute, the monitor's
launch time is the DSL's.

Glue is what a DSL kernel legitimately needs around it: allocation, views, copies, fills and casts. Everything
else PyTorch computed counts against the DSL's share of the work.
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
GLUE_KERNEL_WORDS = ("copy", "fill", "memcpy", "memset", "Memcpy", "Memset")


@dataclass
class WorkEvidence:
    """One profiled call: which PyTorch compute ran and how the work split between it and the DSL."""

    source: str                       # 'cupti_kernels' | 'aten_ops'
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


def _op_name(event_name: str) -> str:
    return event_name.split("::", 1)[1] if event_name.startswith("aten::") else event_name


def summarise(profile: Any, on_gpu: bool, dsl_launch_us: float) -> WorkEvidence:
    """Classify the events of a finished `torch.profiler.profile`."""
    events = profile.events()
    if on_gpu:
        evidence = WorkEvidence("cupti_kernels")
        for event in events:
            if getattr(event, "device_type", None) is None or "CUDA" not in str(event.device_type):
                continue
            name, duration = event.name, float(getattr(event, "device_time", 0.0) or event.time_range.elapsed_us())
            if any(word in name for word in GLUE_KERNEL_WORDS):
                evidence.torch_glue_us += duration
            elif "at::" in name or "at_cuda" in name:
                evidence.torch_compute_us += duration
                evidence.compute_ops[name[:80]] = evidence.compute_ops.get(name[:80], 0) + 1
            else:
                evidence.dsl_us += duration
        return evidence
    evidence = WorkEvidence("aten_ops", dsl_us=dsl_launch_us)
    for event in events:
        if not event.name.startswith("aten::"):
            continue
        name = _op_name(event.name)
        self_us = float(event.self_cpu_time_total)
        if name in GLUE_OPS:
            evidence.torch_glue_us += self_us
        else:
            evidence.torch_compute_us += self_us
            evidence.compute_ops[name] = evidence.compute_ops.get(name, 0) + 1
    return evidence
