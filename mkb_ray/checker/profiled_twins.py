"""Does the DSL's work vanish when nothing profiles? Each profiled call has an unprofiled twin on the same draw.

The decoration rule reads the profiled calls, and a kernel can tell whether a call is profiled (the profiler's
state, the tracer's cost): with the source rules off, `tests/adversarial/v3_profiled_call_detected_runtime.py` runs
the honest DSL kernel only while profiled and eager PyTorch plus a 64-element DSL "flag" launch in every other call,
and passed before this rule (CPU, mlp_norm/01: 185 µs in the DSL's launches per profiled call, 7 µs per unprofiled
one). So before each profiled call the checker makes one unprofiled call on the same draw — the kernel cannot know
that this draw will be profiled next — and compares the CPU time the kernel process measured inside the DSL's
launches in the two. An honest kernel launches the same work on the same inputs whether profiled or not.

The measure is the launching thread's CPU time inside the DSL's launches (`time.thread_time` in the kernel
process, kernel_runner/launches.py), not their wall time. Wall time cannot decide this on a loaded machine: a
stalled twin raises its pair, a stalled profiled call lowers it, and three pairs are not robust to both — with the
best pair, a hack passed when one twin stalled (102.7 µs against 194.5, 0.53, among pairs of 0.04); with the median
pair, mlp_norm/13's honest CPU solution failed in a full test run when two profiled calls stalled (484/3063,
472/4012, 526/463 µs). CPU time does not count the time a descheduled thread waits, so a stall moves neither side.

The rule (CPU target, after timing, over every profiled call's twin, three pairs at the production protocol): the
median twin of the judgement, unprofiled over profiled DSL CPU time, must reach TWIN_YARDSTICK. Measured
(benchmarks/profiled_twins.py, benchmarks/results/2026-12-05-cpu-profiled-twins-cpu-time.txt): the 74 shipped CPU
solutions' medians 0.821 or more idle and 0.785 or more beside two busy loops (single pairs down to 0.32: a profiled
call can read high, so one pair decides nothing); the three hacks in tests/adversarial/*_runtime.py 4-6 % in each of
60 judgements beside two busy loops. Pairs whose profiled DSL time is under TWIN_FLOOR_US say nothing (timer
resolution and launch overhead). On a GPU a launch returns before its device work is done, so both times are the
host's launch time, which would decide nothing: no twin is made there. What a kernel can still do: spend as long
in the DSL in every call as in a profiled one (spinning on the CPU) and do the work eagerly besides — it then pays
for both in every timed call.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Optional

from .work_share import microseconds

TWIN_YARDSTICK = 0.25
TWIN_FLOOR_US = 5.0


def _dsl_cpu_us(reply: Any) -> Optional[float]:
    """The reply's CPU µs inside the DSL's launches; a record without a usable figure reads 0 (fails closed: a twin
    at 0 fails its pair, a profiled call at 0 is under the floor and says nothing); no record at all: None."""
    record = reply.get("wall") if isinstance(reply, dict) else None
    return microseconds(record.get("dsl_cpu_us")) if isinstance(record, dict) else None


@dataclass
class ProfiledTwins:
    """Each profiled call's DSL CPU time beside its unprofiled twin's, as the kernel process measured them (µs)."""

    pairs: list[tuple[float, float]] = field(default_factory=list)  # (unprofiled twin, profiled)

    def add(self, twin_reply: Any, profiled_reply: Any) -> None:
        twin, profiled = _dsl_cpu_us(twin_reply), _dsl_cpu_us(profiled_reply)
        if twin is not None and profiled is not None:
            self.pairs.append((twin, profiled))

    @property
    def ratios(self) -> list[float]:
        return [twin / profiled for twin, profiled in self.pairs if profiled >= TWIN_FLOOR_US]

    def check(self) -> Optional[tuple[bool, str]]:
        """(passed, detail), or None while no pair says anything."""
        ratios = self.ratios
        if not ratios:
            return None
        median = statistics.median(ratios)
        shown = ", ".join(f"{twin:.0f}/{profiled:.0f} µs" for twin, profiled in self.pairs)
        detail = (f"the DSL's launches took {median:.0%} as much CPU time in the median unprofiled twin of a profiled "
                  f"call as in the profiled call on the same draw (the bar: {TWIN_YARDSTICK:.0%}; twin/profiled: "
                  f"{shown})")
        return median >= TWIN_YARDSTICK, detail

    def as_evidence(self) -> dict[str, Any]:
        ratios = self.ratios
        return {"pairs_cpu_us": [[round(twin, 1), round(profiled, 1)] for twin, profiled in self.pairs],
                "best_ratio": max(ratios, default=None),
                "median_ratio": statistics.median(ratios) if ratios else None}
