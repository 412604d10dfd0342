"""Named timing methods. Each draw gets fresh inputs, prepared outside the measured region.

- `cuda_events_l2_flushed`: before each draw a 256 MiB buffer is zeroed (evicting the 50-60 MiB L2 of H100/H200)
  and the device is synchronised; CUDA events bracket the call on the current stream, and a device-wide
  synchronize follows it. Trade-off: excludes launch latency hidden before the start event, includes the host
  overhead of `solve` between the events (as the eager baseline does too).
- `wall_clock`: `time.perf_counter` around the call on the CPU. Trade-off: includes Python overhead, which at
  smoke shapes can dominate; fine for the CPU target, whose role is to execute kernels, not to rank them.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024


@dataclass
class TimingResult:
    method: str
    median_ms: float
    min_ms: float
    max_ms: float
    samples: int


def time_draws(
    fn: Callable[..., Any],
    draw: Callable[[int], Sequence[Any]],
    warmup: int,
    timed: int,
    on_gpu: bool,
    after_call: Callable[[int, Any], None] | None = None,
) -> TimingResult:
    """Time `fn(*draw(i))` for `timed` draws after `warmup` draws; `after_call(i, result)` sees every result."""
    samples: list[float] = []
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda") if on_gpu else None
    for index in range(warmup + timed):
        inputs = draw(index)
        if on_gpu:
            assert flush is not None
            flush.zero_()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            result = fn(*inputs)
            end.record()
            torch.cuda.synchronize()
            elapsed_ms = start.elapsed_time(end)
        else:
            started = time.perf_counter()
            result = fn(*inputs)
            elapsed_ms = (time.perf_counter() - started) * 1e3
        if after_call is not None:
            after_call(index, result)
        if index >= warmup:
            samples.append(elapsed_ms)
    return TimingResult(
        method="cuda_events_l2_flushed" if on_gpu else "wall_clock",
        median_ms=statistics.median(samples),
        min_ms=min(samples),
        max_ms=max(samples),
        samples=len(samples),
    )
