"""Time the checker owns: every draw is measured here, around a round trip to the kernel process.

- `checker_roundtrip_l2_flushed` (GPU): the checker zeroes a 256 MiB buffer (evicting the 50-60 MiB L2 of
  H100/H200, which its contexts share with the kernel process's), synchronises, takes the time, asks for the
  call, and stops the clock once the reply is in **and** its own read of one byte of every output slot has
  completed (a fence: work the kernel process left queued on the device delays that read, so it is timed).
- `checker_roundtrip_wall_clock` (CPU): the same round trip, without flush and fence.

One round trip carries `draws_per_trip` draws (method suffix `_x<k>`), each in its own bank of the exchange: the
kernel process runs `solve` on bank 0, then bank 1, ..., then replies once. A timed sample is the trip's time over
its draws. Why: on the H200 the trip itself (pipes, the switch between the two processes' GPU contexts, the
fence) costs 0.25-0.74 ms and jitters by as much as the kernels it brackets; k draws per trip divide both by k.
Each draw still reads inputs nothing touched since the flush (the checker wrote every bank before flushing), and
the kernel cannot reuse one draw's answer for the next: every bank holds a fresh draw.

The harness's own cost — the message, `solve`'s dispatch in the kernel process, the copy of returned outputs
into their slots — is measured the same way for a no-op `solve` in a baseline process (where no candidate ever
ran) and subtracted; eager and torch.compile baselines go through the identical path. What a kernel process does
to its own timers, modes or `synchronize` cannot move a number recorded here.

On a GPU the reported time is the device's own record instead (`cuda_events_led_*`): the harness in the kernel
process flushes the L2, queues a launch lead (a ~1 ms spin ahead of `start`, so the span is the call's device time
and not the host's launch path) and puts CUDA events around every call (`kernel_runner/draw_clock.py`), and the
trip's reply lists each draw's time. Why: the round trip is 3x a 40 µs kernel's device time and jitters by up to
63 % between judgements (issue 25); the led device record reads 1.01-1.14x in-process led events for 7 of 8 rows
measured on the H200 (problems/CONTRACT.md, "Limits"). A device
sample is a trip's device time per draw (see time_draws). Why that can be trusted: the records come from harness
code the kernel cannot reach (the same source rules that keep it from the runner's launch counts), and the checker
holds them to its own clock — a trip whose device times add up to more than the checker's wall clock around that
trip is a forged or broken record and fails (`protocol`); the wall-clock figure, net of the no-op trip, stays in the
verdict as an upper bound (`kernel_wall_ms`), and a device time below `WALL_BOUND_RATIO` of it is raised to that
floor.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from ..kernel_runner.draw_clock import L2_FLUSH_BYTES
from .kernel_process import Rejected

# A kernel whose net time (round trip minus the no-op's) is under this share of the no-op round trip is not resolved:
# its time is the difference of two noisy numbers of which it is a small part (under load a no-op trip took 21.7 ms
# and a kernel's net came out at the 1 µs floor: "67441x eager"), so no speedup is claimed for it.
TIMING_RESOLUTION = 0.1


def timing_resolved(kernel_roundtrip_ms: float, harness_overhead_ms: float) -> bool:
    """Whether the kernel's time stands out of the harness's own round trip enough to claim a speedup."""
    return kernel_roundtrip_ms - harness_overhead_ms >= TIMING_RESOLUTION * harness_overhead_ms


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


def method_name(on_gpu: bool, draws_per_trip: int = 1, flush_l2: bool = True, device_clock: bool = True) -> str:
    """`cuda_events_*` when a GPU's device times decide, `checker_roundtrip_*` when the checker's wall clock does."""
    if on_gpu:
        # `_led`: the draw clock's launch lead (kernel_runner/draw_clock.py); baselines timed without it are
        # another method, so their cache entries are not reused.
        base = "cuda_events_led" if device_clock else "checker_roundtrip"
        base += "_l2_flushed" if flush_l2 else "_l2_warm"
    else:
        base = "checker_roundtrip_wall_clock"
    return f"{base}_x{draws_per_trip}" if draws_per_trip > 1 else base


# The device times the kernel process reports may fall this far below the checker's own net wall clock per draw and
# no further: below, the floor counts. The launch lead (kernel_runner/draw_clock.py) takes the host's launch path
# out of the device record but not out of the checker's clock, so honest short kernels now record far less than
# that clock: on the H200 (2026-12-04, 12 rows) the device time of moe/01's CuTe DSL kernel was 0.022 of it (8.4 µs
# against 0.38 ms, most of it the candidate process's per-call guards and CuTe's Python launch), and a 0.1 floor
# raised 4 of 12 honest rows to itself. So the floor is 0.01: a forged record can claim at most 100x what the checker
# saw room for. It is a weak bound; what the record's trust rests on is said in problems/CONTRACT.md.
WALL_BOUND_RATIO = 0.01
# Slack of the fit test: events and the checker's perf_counter are two clocks; a trip's device times may exceed
# its wall time by this much before the record counts as impossible.
CLOCK_SLACK_MS = 0.02


def device_times(reply: Any, count: int, wall_ms: float) -> list[float]:
    """The per-draw device times of one trip's reply, checked against the checker's own clock around that trip:
    `count` finite non-negative numbers whose sum fits inside `wall_ms`. Anything else is a forged or broken
    record; `Rejected('protocol')`, never a number that was not possible."""
    times = reply.get("device_ms") if isinstance(reply, dict) else None
    if (not isinstance(times, list) or len(times) != count
            or not all(isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t >= 0
                       for t in times)):
        raise Rejected("protocol", f"the kernel process's reply to a timed round trip of {count} draw(s) carried no "
                       f"valid device time per draw ({str(times)[:200]})")
    if sum(times) > wall_ms + CLOCK_SLACK_MS:
        raise Rejected("protocol", f"the kernel process reported {sum(times):.4f} ms of device time for a round trip "
                       f"the checker timed at {wall_ms:.4f} ms: a record longer than the time it describes is forged")
    return [float(t) for t in times]


# Memory the extra banks may take: a GPU exchange of production shapes, a tmpfs file of smoke shapes on CPU.
BANK_BUDGET_BYTES = {True: 8 << 30, False: 512 << 20}


def draws_per_trip(requested: int, timed: int, bank_bytes: int, on_gpu: bool) -> int:
    """The largest k ≤ `requested` that divides `timed` (every timed trip carries k draws) and whose k banks of
    `bank_bytes` fit the budget; 1 at least."""
    for k in range(min(requested, timed), 1, -1):
        if timed % k == 0 and k * bank_bytes <= BANK_BUDGET_BYTES[on_gpu]:
            return k
    return 1


def trips(first: int, count: int, size: int) -> list[range]:
    """Draw indexes first..first+count-1 in round trips of `size` (the last one may be shorter)."""
    return [range(start, min(start + size, first + count)) for start in range(first, first + count, size)]


class RoundTripTimer:
    """Times `call()` (send a request, wait for the reply) on the checker's clock."""

    def __init__(self, on_gpu: bool, fence: Optional[Callable[[], None]] = None, flush_l2: bool = True) -> None:
        self.on_gpu = on_gpu
        self.fence = fence
        self.flush_l2 = flush_l2
        self.flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda") \
            if on_gpu and flush_l2 else None

    def measure(self, call: Callable[[], Any]) -> tuple[Any, float]:
        if self.flush is not None:
            self.flush.zero_()
            torch.cuda.synchronize()
        started = time.perf_counter()
        reply = call()
        if self.fence is not None:
            self.fence()
        return reply, (time.perf_counter() - started) * 1e3


def _count(value: Any) -> int:
    """A count the kernel process reported, or 0 when it is not one (its account informs, never decides)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


@dataclass
class TimedSeries:
    """One series of timed draws: the checker's wall clock per draw, and on a GPU the device's record."""

    wall: TimingResult
    device: Optional[TimingResult] = None
    late_draws: int = 0  # draws whose work outlived `solve`'s return (counted to the device-wide wait)
    # The median device time of the draws at each position in a trip (first, second, ...): evidence of what the
    # pipe wait before a trip costs its first call, never a figure the verdict reports as the kernel's time.
    by_position: list[float] = field(default_factory=list)


def time_draws(timer: RoundTripTimer, prepare: Callable[[range], None], call: Callable[[int], Any], warmup: int,
               timed: int, after_call: Optional[Callable[[range, Any], None]] = None,
               per_trip: int = 1) -> TimedSeries:
    """For warmup + timed draws in round trips of `per_trip`: `prepare(trip)` (untimed: one fresh draw per bank),
    then `call(len(trip))` timed, then `after_call(trip, reply)` once the trip's time was taken. A wall sample is a
    timed trip's time per draw; on a GPU a device sample is the trip's device time (from the reply, `device_times`)
    per draw. `samples` counts timed draws."""
    if timed % per_trip:
        raise ValueError(f"{timed} timed draws do not split into round trips of {per_trip}")
    walls: list[float] = []
    devices: list[float] = []
    positions: list[list[float]] = [[] for _ in range(per_trip)]
    late = 0
    for trip in trips(0, warmup, per_trip) + trips(warmup, timed, per_trip):
        prepare(trip)
        reply, elapsed_ms = timer.measure(lambda: call(len(trip)))  # noqa: B023 - called here, in this trip
        recorded = device_times(reply, len(trip), elapsed_ms) if timer.on_gpu else []
        if after_call is not None:
            after_call(trip, reply)
        if trip.start >= warmup:
            walls.append(elapsed_ms / len(trip))
            # Per trip, not per draw: every bank of a trip is written before the trip starts and the inputs' storage
            # is the whole exchange, so a kernel could compute all of a trip's banks in its first call and return
            # at once from the others; a median over draws would then read the others' near-zero times.
            if recorded:
                devices.append(sum(recorded) / len(recorded))
                for position, ms in enumerate(recorded):
                    positions[position].append(ms)
            late += _count(reply.get("late_draws")) if timer.on_gpu else 0

    def result(samples: list[float], device_clock: bool) -> TimingResult:
        return TimingResult(method_name(timer.on_gpu, per_trip, timer.flush_l2, device_clock),
                            statistics.median(samples), min(samples), max(samples), timed)

    return TimedSeries(result(walls, False), result(devices, True) if devices else None, late,
                       [statistics.median(p) for p in positions if p])
