"""Time the checker owns: every draw is measured here, around a round trip to the kernel process.

- `checker_roundtrip_l2_flushed` (GPU): the checker zeroes a 256 MiB buffer (evicting the 50-60 MiB L2 of
  H100/H200, which its contexts share with the kernel process's), synchronises, takes the time, asks for the
  call, and stops the clock once the reply is in **and** its own read of one byte of every output slot has
  completed (a fence: work the kernel process left queued on the device delays that read, so it is timed).
- `checker_roundtrip_wall_clock` (CPU): the same round trip, without flush and fence.

The harness's own cost — the message, `solve`'s dispatch in the kernel process, the copy of returned outputs
into their slots — is measured the same way for a no-op `solve` in a baseline process (where no candidate ever
ran) and subtracted; eager and torch.compile baselines go through the identical path. What a kernel process does
to its own timers, modes or `synchronize` cannot move a number recorded here.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024


@dataclass
class TimingResult:
    method: str
    median_ms: float
    min_ms: float
    max_ms: float
    samples: int

    def net_of(self, overhead_ms: float) -> "TimingResult":
        """This timing with the harness's no-op round trip taken off (never below a microsecond)."""
        floor = 1e-3
        return TimingResult(self.method, max(self.median_ms - overhead_ms, floor),
                            max(self.min_ms - overhead_ms, floor), max(self.max_ms - overhead_ms, floor), self.samples)


def method_name(on_gpu: bool) -> str:
    return "checker_roundtrip_l2_flushed" if on_gpu else "checker_roundtrip_wall_clock"


class RoundTripTimer:
    """Times `call()` (send a request, wait for the reply) on the checker's clock."""

    def __init__(self, on_gpu: bool, fence: Optional[Callable[[], None]] = None) -> None:
        self.on_gpu = on_gpu
        self.fence = fence
        self.flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda") if on_gpu else None

    def measure(self, call: Callable[[], Any]) -> tuple[Any, float]:
        if self.flush is not None:
            self.flush.zero_()
            torch.cuda.synchronize()
        started = time.perf_counter()
        reply = call()
        if self.fence is not None:
            self.fence()
        return reply, (time.perf_counter() - started) * 1e3


def time_draws(timer: RoundTripTimer, prepare: Callable[[int], None], call: Callable[[int], Any], warmup: int,
               timed: int, after_call: Optional[Callable[[int, Any], None]] = None) -> TimingResult:
    """`prepare(i)` (untimed: fresh inputs into the exchange), then `call(i)` timed, for warmup + timed draws;
    `after_call(i, reply)` runs after the draw's time was taken."""
    samples: list[float] = []
    for index in range(warmup + timed):
        prepare(index)
        reply, elapsed_ms = timer.measure(lambda: call(index))
        if after_call is not None:
            after_call(index, reply)
        if index >= warmup:
            samples.append(elapsed_ms)
    return TimingResult(method_name(timer.on_gpu), statistics.median(samples), min(samples), max(samples),
                        len(samples))
