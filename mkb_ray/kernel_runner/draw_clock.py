"""The device's own record of one `solve` call on a GPU: CUDA events around the call, L2 cold before it.

This is how MetaKernelBench and KernelBench time a kernel in-process (an L2 flush, then events around each call,
then a device-wide wait), made here by the harness in the kernel process for every GPU call, whether the checker
times it, checks it, profiles it or not: the flush and the events are part of every call, so none of them tells a
kernel which kind of call it is in — with one addition, the **launch lead**.

The launch lead: after the flush's wait, a one-thread spin kernel of `LAUNCH_LEAD_CYCLES` (~1 ms at the H200's
boost clock) is queued ahead of `start`, and not waited for. While it spins, the host runs `solve` and queues its
launches, so `start` passes when the device is ready to run the call's first kernel and the span is the call's
device time. Why: on the H200 a call's events on an idle device measure the host's launch path as much as the
kernel, and that path is 2x slower after any pause of a millisecond (the profiler's kernel records of the same
calls did not move: 11.8 µs, 59.3 µs and 89.2 µs of kernel time with or without a 5 ms pause before each call,
while the un-led span went 0.024 -> 0.051, 0.185 -> 0.243 and 0.173 -> 0.263 ms;
`benchmarks/results/2026-12-04-h200-session17-launch-lead.txt`). With the lead those three read 0.0142, 0.0612 and
0.0887 ms whether or not the host had paused, within 0.2 % run to run. A judge always pauses between calls (the
checker's checks), so un-led events could not be made to agree with back-to-back timing, nor with themselves.
What the lead does not hide: host work past the lead still delays the call's kernels and counts; work that needs
the inputs cannot run on the host before a device->host copy, which the device records. What it opens: device work
on a side stream could run beside the spin, before `start`; a profiled call's record shows any activity that
began before the spin ended, and such work is rejected (`early_work`, `evidence.py`).

Three events per call, all on the stream that was current when the call began:
- `start`, recorded once the flush is done, the device was idle, and the launch lead has spun;
- `end`, recorded right after `solve` returned (the call's own span, as KernelBench's events give it);
- `settled`, recorded after a device-wide wait that begins once `end` has passed. Work `solve` left running past
  its return (on a side stream, which `end` does not wait for) makes that wait long and `settled` late; such a
  call is counted to `settled`, never to `end` (`counted_ms`), so deferring work buys no speed.

The checker does not trust these numbers on their own: each round trip's device times must fit inside its own
wall clock around that trip (`checker/timing.py`), and the verdict keeps that wall-clock figure beside them.
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
# The launch lead's spin, in device clock cycles: ~1 ms at 1.98 GHz. The longest host launch path measured after a
# pause, CuTe DSL's, took ~0.25 ms (a 0.1 ms lead left mlp_norm/01 at 0.0906 vs 0.1955 ms with and without a pause).
LAUNCH_LEAD_CYCLES = 2_000_000


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

    def __init__(self, flush_l2: bool, lead_cycles: int = LAUNCH_LEAD_CYCLES) -> None:
        self.flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda") if flush_l2 else None
        self.start, self.end, self.settled = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        self.lead_cycles = lead_cycles
        # Held from before any candidate is imported: the builtin itself, never a name looked up at call time.
        self.spin = torch._C._cuda_sleep
        self.reset_persisting_l2 = _persisting_l2_reset() if flush_l2 else None

    def prepare(self) -> None:
        """Before the call (and before a profiler starts, so the flush is never part of a call's record). No warm-up:
        2 ms of back-to-back flushes before each call made it slower, not faster (0.544 vs 0.428 ms for attention/01
        after 1 ms of host sleep; benchmarks/results/2026-12-04-h200-timing-fidelity.txt, probe 2)."""
        if self.flush is not None:
            if self.reset_persisting_l2 is not None:
                # Lines a kernel marked persisting (an access-policy window on its stream, with a persisting L2
                # carve-out) would survive the flush and hand the next call warm inputs: made normal first.
                self.reset_persisting_l2()
            self.flush.zero_()
        torch.cuda.synchronize()

    def run(self, call: Callable[[], Any]) -> tuple[Any, DrawTime]:
        """`call()` between the events; `prepare()` must have run just before."""
        stream = torch.cuda.current_stream()
        if self.lead_cycles:
            self.spin(self.lead_cycles)  # on the current stream, ahead of `start`
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


def _persisting_l2_reset() -> Callable[[], Any] | None:
    """The driver's cuCtxResetPersistingL2Cache (cuda-python, which CuTe DSL depends on), or None where the bindings
    are not installed. Resolved before any candidate is imported."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return None
    return driver.cuCtxResetPersistingL2Cache
