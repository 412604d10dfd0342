"""The device's own record of one `solve` call on a GPU: CUDA events around the call, L2 cold before it.

This is how MetaKernelBench and KernelBench time a kernel in-process (an L2 flush, then events around each call,
then a device-wide wait), made here by the harness in the kernel process for every GPU call, whether the checker
times it, checks it, profiles it or not: the flush and the events are part of every call, so none of them tells a
kernel which kind of call it is in.

Three events per call, all on the stream that was current when the call began:
- `start`, recorded once the flush is done and the device is idle;
- `end`, recorded right after `solve` returned (the call's own span, as KernelBench's events give it);
- `settled`, recorded after a device-wide wait that begins once `end` has passed. Work `solve` left running past
  its return (on a side stream, which `end` does not wait for) makes that wait long and `settled` late; such a
  call is counted to `settled`, never to `end` (`counted_ms`), so deferring work buys no speed.

The checker does not trust these numbers on their own: each round trip's device times must fit inside its own
wall clock around that trip (`judge_worker/timing.py`), and the verdict keeps that wall-clock figure beside them.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024  # past the 50-60 MiB L2 of H100/H200
# Past `end`, a device-wide wait plus one event record on an idle device takes the host some 10-30 µs; a call
# whose `settled` comes later than this after `end` left device work behind and is counted to `settled`.
SETTLE_SLACK_MS = 0.1


@dataclass(frozen=True)
class DrawTime:
    span_ms: float  # start -> end: the call as KernelBench's events see it
    settled_ms: float  # start -> settled: until the device had nothing left of the call
    drain_ms: float  # host clock: the device-wide wait begun once `end` had passed

    @property
    def late(self) -> bool:
        """Work outlived `end`: the device record shows `settled` far past `end` *and* the device-wide wait, begun
        after `end` had passed, itself took that long. The record alone also flagged honest calls whose host was
        merely slow to record `settled` (1 of 50 draws of a CuTe DSL kernel on the H200, 2026-12-04)."""
        return self.settled_ms - self.span_ms > SETTLE_SLACK_MS and self.drain_ms > SETTLE_SLACK_MS

    @property
    def counted_ms(self) -> float:
        return self.settled_ms if self.late else self.span_ms


class DrawClock:
    """Flush, events, wait: one per kernel process on a GPU. `flush_l2=False` is MetaKernelBench's protocol."""

    def __init__(self, flush_l2: bool) -> None:
        self.flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda") if flush_l2 else None
        self.start, self.end, self.settled = (torch.cuda.Event(enable_timing=True) for _ in range(3))

    def prepare(self) -> None:
        """Before the call (and before a profiler starts, so the flush is never part of a call's record). No warm-up:
        2 ms of back-to-back flushes before each call made it slower, not faster (0.544 vs 0.428 ms for attention/01
        after 1 ms of host sleep; benchmarks/results/2026-12-04-h200-timing-fidelity.txt, probe 2)."""
        if self.flush is not None:
            self.flush.zero_()
        torch.cuda.synchronize()

    def run(self, call: Callable[[], Any]) -> tuple[Any, DrawTime]:
        """`call()` between the events; `prepare()` must have run just before."""
        stream = torch.cuda.current_stream()
        self.start.record(stream)
        result = call()
        self.end.record(stream)
        self.end.synchronize()
        draining = time.perf_counter()
        torch.cuda.synchronize()  # returns at once unless work the call left (e.g. on a side stream) still runs
        drain_ms = (time.perf_counter() - draining) * 1e3
        self.settled.record(stream)
        self.settled.synchronize()
        return result, DrawTime(self.start.elapsed_time(self.end), self.start.elapsed_time(self.settled), drain_ms)
