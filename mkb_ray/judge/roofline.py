"""Speed-of-light: how close a GPU verdict's time is to what the device allows for the problem's work.

A problem's sidecar states its work as `flops` and `bytes`, arithmetic over its shape constants; with the shapes
a verdict was judged at, the kernel's median time gives an achieved FLOP/s and byte/s. Each is divided by the
device's peak (compute at the problem's `flops_kind`, HBM bandwidth), and the larger fraction is the verdict's
roofline: a memory-bound kernel is read against bandwidth, a compute-bound one against the tensor cores. So "2x
over eager" can be read against "eager was at 5 % of the hardware" or "at 60 %".

Peaks are the vendor's dense figures (no sparsity), taken from NVIDIA's H100/H200 datasheets (SXM parts).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

from ..problem_source import evaluate_work
from ..records.verdict import Roofline


@dataclass(frozen=True)
class DevicePeaks:
    name: str
    hbm_bytes_per_s: float
    flops_per_s: Mapping[str, float]  # by flops_kind

    def floor_s(self, flops: float, moved: float, flops_kind: str) -> tuple[float, str]:
        """The speed-of-light time of the work and what bounds it: max(flops / compute peak, bytes / bandwidth)."""
        compute, memory = flops / self.flops_per_s[flops_kind], moved / self.hbm_bytes_per_s
        return (memory, "memory") if memory >= compute else (compute, "compute")


# Dense tensor-core peaks (TFLOP/s: bf16 989, fp8/int8 1979, fp32 non-tensor 67) and HBM bandwidth.
H200 = DevicePeaks("NVIDIA H200 (SXM)", 4.8e12,
                   {"bf16_tensor": 989.4e12, "fp8_tensor": 1978.9e12, "int8_tensor": 1978.9e12, "fp32": 66.9e12})
H100 = DevicePeaks("NVIDIA H100 (SXM)", 3.35e12,
                   {"bf16_tensor": 989.4e12, "fp8_tensor": 1978.9e12, "int8_tensor": 1978.9e12, "fp32": 66.9e12})
_BY_NAME = (("h200", H200), ("h100", H100))

def peaks_for(device_name: Optional[str]) -> Optional[DevicePeaks]:
    lowered = (device_name or "").lower()
    return next((peaks for key, peaks in _BY_NAME if key in lowered), None)


def roofline(flops_expr: Optional[str], bytes_expr: Optional[str], flops_kind: str, shapes: Mapping[str, float],
             kernel_ms: Optional[float], eager_ms: Optional[float], device_name: Optional[str]) -> Optional[Roofline]:
    """The verdict's roofline, or None when there is no time, no known device, or no stated work."""
    peaks = peaks_for(device_name)
    if peaks is None or not kernel_ms or kernel_ms <= 0 or (flops_expr is None and bytes_expr is None):
        return None
    flops = evaluate_work(flops_expr, shapes) if flops_expr else 0.0
    moved = evaluate_work(bytes_expr, shapes) if bytes_expr else 0.0
    floor, bound = peaks.floor_s(flops, moved, flops_kind)  # a time's fraction of the roof is floor / time
    seconds = kernel_ms / 1e3
    return Roofline(peaks=peaks.name, flops=flops, bytes=moved, flops_kind=flops_kind, bound=bound,
                    fraction=floor / seconds, achieved_tflops=flops / seconds / 1e12,
                    achieved_tb_s=moved / seconds / 1e12,
                    eager_fraction=floor / (eager_ms / 1e3) if eager_ms and eager_ms > 0 else None)
