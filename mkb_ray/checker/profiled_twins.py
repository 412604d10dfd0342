"""Does the DSL's work vanish when nothing profiles? Each profiled call has an unprofiled twin on the same draw.

The decoration rule reads the profiled calls, and a kernel can tell whether a call is profiled (the profiler's
state, the tracer's cost): with the source rules off,
`tests/adversarial_pending/v3_profiled_call_detected_runtime.py` runs the honest DSL kernel only while profiled and
eager PyTorch plus a 64-element DSL "flag" launch in every other call, and passed (CPU, mlp_norm/01: 185 µs in the
DSL's launches per profiled call, 7 µs per unprofiled one). So before each profiled call the checker makes one
unprofiled call on the same draw — the kernel cannot know that this draw will be profiled next — and compares the
time the kernel process measured inside the DSL's launches in the two. An honest kernel launches the same work on
the same inputs whether profiled or not: the 74 shipped CPU solutions' best pairs read 0.965-2.4 on an idle 2-core
machine and 0.99-1.37 with two busy-looping processes beside them (the lowest single pair 0.46), while the hack
above reads 0.04 (2026-12-05, benchmarks/results/2026-12-05-cpu-profiled-twins.txt).

The rule (CPU target, after timing, over every profiled call's twin, three pairs at the production protocol): the
best twin of the judgement, unprofiled over profiled DSL time, must reach TWIN_YARDSTICK. A stall on a loaded CPU
moves one pair either way: a stalled profiled call lowers its pair, a stalled twin raises it. The best pair keeps
honest kernels passing when profiled calls stall: with the median pair (tried 2026-12-05) mlp_norm/13's CPU solution
failed in a full test run, two of its three profiled calls stalled (484/3063, 472/4012, 526/463 µs), while all 74
shipped CPU solutions passed it in isolated runs (lowest median 0.907 idle, 0.659 beside two busy loops,
benchmarks/results/2026-12-05-cpu-profiled-twins-median.txt). The price: one stalled twin passes a kernel that
leaves the DSL out of every unprofiled call (caught beside two busy loops: 102.7 µs against 194.5, 0.53, among pairs
of 0.04), so the hacks this rule is for are rejected in nearly every judgement, not every one
(tests/adversarial_pending/README.md). Three wall-time pairs cannot be robust on both sides; a measure a stall does
not move (the launching thread's CPU time) is the next step. Pairs whose profiled DSL time is under TWIN_FLOOR_US
say nothing (timer resolution and launch overhead). On a GPU a launch returns before its device work is done, so
both times are the host's launch time, which would decide nothing: no twin is made there. What a kernel can still
do: spend as long in the DSL in every call as in a profiled one (spinning) and do the work eagerly besides — it then
pays for both in every timed call.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Optional

from .work_share import microseconds

TWIN_YARDSTICK = 0.25
TWIN_FLOOR_US = 5.0


def _dsl_us(reply: Any) -> Optional[float]:
    record = reply.get("wall") if isinstance(reply, dict) else None
    return microseconds(record.get("dsl_us")) if isinstance(record, dict) else None


@dataclass
class ProfiledTwins:
    """Each profiled call's DSL time beside its unprofiled twin's, as the kernel process measured them (µs)."""

    pairs: list[tuple[float, float]] = field(default_factory=list)  # (unprofiled twin, profiled)

    def add(self, twin_reply: Any, profiled_reply: Any) -> None:
        twin, profiled = _dsl_us(twin_reply), _dsl_us(profiled_reply)
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
        best = max(ratios)
        shown = ", ".join(f"{twin:.0f}/{profiled:.0f} µs" for twin, profiled in self.pairs)
        detail = (f"the DSL's launches ran {best:.0%} as long in the best unprofiled twin of a profiled call as in "
                  f"the profiled call on the same draw (the bar: {TWIN_YARDSTICK:.0%}; twin/profiled: {shown})")
        return best >= TWIN_YARDSTICK, detail

    def as_evidence(self) -> dict[str, Any]:
        return {"pairs_us": [[round(twin, 1), round(profiled, 1)] for twin, profiled in self.pairs],
                "best_ratio": max(self.ratios, default=None),
                "median_ratio": statistics.median(self.ratios) if self.ratios else None}
