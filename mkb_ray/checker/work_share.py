"""Did the DSL do the work? The profiled calls of one judgement, and the rule that decides on them.

A profiled call reports how long the DSL's launches ran and how long PyTorch (or numpy, or host code) computed
besides glue (`kernel_runner/evidence.py`). One call's split is a time measurement, and on a shared CPU one eager
operator can stall many times its usual length: in CI (2 cores, other processes starting) an honest TIRx RMSNorm
whose eager `x + residual` is about 7 % of the call (`aten::add` 12 µs here) read `aten::add` 441 µs against the
DSL's 256 µs in one audit, and was rejected. Summing the calls' times would not be enough (that one stall still
weighs 441 µs against three calls' DSL time), so the rule takes the median of the calls' own shares: a kernel that
leaves the work to PyTorch does so in every profiled call and fails, while one stalled operator no longer decides
alone. The profiled calls' positions among the draws are secret, so a kernel cannot put its DSL work only where the
profiler looks; the summed times stay in the verdict's evidence.

The records come from the kernel process (untrusted): each field is read as a finite, non-negative number, and
each share is computed here, never taken from the record (a negative PyTorch time would otherwise raise it).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Optional

MIN_DSL_SHARE = 0.5  # of DSL + PyTorch/host compute: the median over the judgement's profiled calls
# Eager PyTorch compute in the median profiled call, over the reference's own compute per call (profiled the same way
# by the checker), at which the eager part is the reference's work whatever the DSL's share of the time: a
# DSL launch that spins buys share, it cannot shrink this (tests/adversarial/v3_decoration_share_bought_with_spin.py).
# CPU target only until it is measured on the GPU's shipped solutions.
EAGER_YARDSTICK = 0.4
# ... and the tensor elements its compute operators took as inputs, over the reference's: both must reach their bar.
# Time alone failed an honest kernel whose one eager operator (a one-element comparison choosing between two DSL
# kernels) read 52-66 % of a SwiGLU reference's 22-26 µs of profiled compute at smoke shapes; its elements are
# ~0 %. An eager copy of the reference reads ~100 % on both.
EAGER_ELEMENTS_YARDSTICK = 0.25
PROFILED_CALLS_BEFORE_TIMING = 3  # at most, before timing: a second and third only while below the bar
# unnamed_us: part of dsl_us, in kernels the DSL's compiler did not produce in the kernel process
# (kernel_runner/evidence.py): CUDA compiled at run time by NVRTC or torch's jiterator, launched beside a DSL kernel
# that only casts. It counts as work outside the DSL: a kernel is the DSL's because the DSL's compile output names
# it, not because it is neither aten's nor named after ATen. Honest solutions recorded none on the H200 (12 rows,
# both DSLs, every family: benchmarks/results/2026-12-04-h200-session17-launch-lead.txt; every GPU solution's
# compiles name their kernels: tests/test_validate.py).
# unlinked_aten_us: part of torch_*_us, in kernels named after ATen that no aten operator launched (evidence only)
TIME_FIELDS = ("dsl_us", "torch_compute_us", "torch_glue_us", "unnamed_us", "unlinked_aten_us")
# GPU: time in kernels no DSL compile produced, in the median profiled call, over the eager reference's own device
# time per call (the checker's baseline, which the kernel cannot touch), at which those kernels did the reference's
# work whatever the DSL's share. The share rule alone compares two times the kernel controls: on the H200
# (2026-12-05) a jiterator kernel computed silu(gate) * up in 164 µs beside a naive CuTe cast of 186 µs, share 53 %,
# and passed (tests/adversarial/cute_v3_foreign_kernel_jiterator.py: 164 µs is 51 % of eager's 319 µs). Honest GPU
# solutions recorded no such time at all (above), so the bar cannot fail one; EAGER_YARDSTICK's value, for the same
# reason (a kernel that leaves that much of the reference's work to code outside the DSL is decoration).
FOREIGN_YARDSTICK = EAGER_YARDSTICK
# ... and, in every profiled call, over the call's own device compute (DSL + PyTorch). The yardstick alone passes a
# foreign kernel that does all of the reference's work faster than eager (a fused kernel is 2-10x faster): on an
# H100 (2026-12-06) tests/adversarial/cute_v3_foreign_kernel_nvrtc.py's NVRTC kernel stayed under it, its CuTe cast
# took about as long, the share rule read ~50 % against its 50 % bar, and 2 of 10 judgements passed it
# (benchmarks/results/2026-12-06-gpu-serving-proof-h100-session30.txt); a spin in the cast would pass it always.
# Honest solutions ran no such kernel in any of the 59 GPU rows judged with the names (2026-12-05; not yet all 148),
# so a small bar cost them nothing there; to pass it a kernel must spend 19 times the foreign kernel's time in the
# DSL. Every call, not the median: the time is not the noisy part here, the names are exact, and an honest call
# reads 0.
FOREIGN_SHARE_BAR = 0.05


def microseconds(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) and number > 0 else 0.0


def _add_counts(into: dict[str, int], counts: Any) -> None:
    """Name -> count pairs from a reply, kept only where the count is a positive int (names cut to 60 chars)."""
    for name, count in (counts.items() if isinstance(counts, dict) else ()):
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            key = str(name)[:60]
            into[key] = into.get(key, 0) + count


@dataclass
class PooledWork:
    """Every profiled call of one judgement so far: each call's share, and their summed times."""

    source: str = ""
    totals: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TIME_FIELDS, 0.0))
    compute_ops: dict[str, int] = field(default_factory=dict)
    unnamed_kernels: dict[str, int] = field(default_factory=dict)
    unlinked_aten_kernels: dict[str, int] = field(default_factory=dict)
    call_shares: list[float] = field(default_factory=list)
    call_compute_us: list[float] = field(default_factory=list)
    call_compute_elements: list[float] = field(default_factory=list)
    call_foreign_us: list[float] = field(default_factory=list)
    call_foreign_shares: list[float] = field(default_factory=list)  # of the call's DSL + PyTorch compute

    def add(self, record: dict[str, Any]) -> float:
        """Add one call's record; returns that call's own DSL share."""
        times = {key: microseconds(record.get(key)) for key in TIME_FIELDS}
        for key, value in times.items():
            self.totals[key] += value
        self.source = self.source or str(record.get("source", ""))[:40]
        _add_counts(self.compute_ops, record.get("compute_ops"))
        _add_counts(self.unnamed_kernels, record.get("unnamed_kernels"))
        _add_counts(self.unlinked_aten_kernels, record.get("unlinked_aten_kernels"))
        share = _dsl_share(times)
        self.call_shares.append(share)
        self.call_compute_us.append(times["torch_compute_us"])
        self.call_compute_elements.append(microseconds(record.get("torch_compute_elements")))
        foreign = foreign_us(times)
        self.call_foreign_us.append(foreign)
        self.call_foreign_shares.append(_share(foreign, times["dsl_us"] - foreign + times["torch_compute_us"]))
        return share

    @property
    def calls(self) -> int:
        return len(self.call_shares)

    @property
    def share(self) -> float:
        """The median call's share (0 with no call): what the rule decides on."""
        return statistics.median(self.call_shares) if self.call_shares else 0.0

    @property
    def median_compute_us(self) -> float:
        """PyTorch (and numpy) compute in the median profiled call."""
        return statistics.median(self.call_compute_us) if self.call_compute_us else 0.0

    @property
    def median_compute_elements(self) -> float:
        """Input elements of PyTorch's compute operators in the median profiled call (CPU target)."""
        return statistics.median(self.call_compute_elements) if self.call_compute_elements else 0.0

    @property
    def median_foreign_us(self) -> float:
        """Time in kernels no DSL compile produced, in the median profiled call (GPU)."""
        return statistics.median(self.call_foreign_us) if self.call_foreign_us else 0.0

    @property
    def highest_foreign_share(self) -> float:
        """GPU: the largest share of a profiled call's device compute spent in kernels no DSL compile produced."""
        return max(self.call_foreign_shares, default=0.0)

    def foreign_check(self, eager_device_ms: Optional[float]) -> tuple[bool, str]:
        """GPU: (passed, detail) of the two bars on kernels no DSL compile produced: FOREIGN_SHARE_BAR of each profiled
        call's own device compute, and FOREIGN_YARDSTICK of the eager reference's device time per call (when known)."""
        foreign, reference_us = self.median_foreign_us, (eager_device_ms or 0.0) * 1e3
        ratio = foreign / reference_us if reference_us > 0 else 0.0
        named = ", ".join(f"{name}×{count}" for name, count in list(self.unnamed_kernels.items())[:3])
        against_reference = (f"{ratio:.0%} of the eager reference's own {reference_us:.0f} µs per call (the bar: "
                             f"{FOREIGN_YARDSTICK:.0%})" if reference_us > 0 else "the eager reference's time unknown")
        detail = (f"kernels no DSL compile produced ran {foreign:.0f} µs in the median of {self.calls} profiled "
                  f"call(s){': ' + named if named else ''}, up to {self.highest_foreign_share:.0%} of a call's own "
                  f"device compute (the bar: {FOREIGN_SHARE_BAR:.0%}); {against_reference}")
        return self.highest_foreign_share < FOREIGN_SHARE_BAR and ratio < FOREIGN_YARDSTICK, detail

    @property
    def summed_share(self) -> float:
        return _dsl_share(self.totals)

    @property
    def passes(self) -> bool:
        return self.share >= MIN_DSL_SHARE

    def describe(self, on_gpu: bool) -> str:
        top = ", ".join(f"{name}×{count}" for name, count in
                        sorted(self.compute_ops.items(), key=lambda kv: -kv[1])[:6])
        other = "PyTorch compute" if on_gpu else "PyTorch/numpy compute"
        calls = ", ".join(f"{share:.0%}" for share in self.call_shares)
        foreign = foreign_us(self.totals)
        named = ", ".join(f"{name}×{count}" for name, count in list(self.unnamed_kernels.items())[:3])
        return (f"DSL share {self.share:.0%}, the median of {self.calls} profiled call(s) [{calls}] ({self.source}, "
                f"summed: DSL {self.totals['dsl_us'] - foreign:.0f} µs, "
                f"{other} {self.totals['torch_compute_us']:.0f} µs"
                f"{': ' + top if top else ''}"
                + (f", kernels no DSL compile produced {foreign:.0f} µs: {named}" if foreign else "") + ")")

    def as_evidence(self) -> dict[str, Any]:
        return {"source": self.source, **self.totals, "compute_ops": dict(self.compute_ops),
                "unnamed_kernels": dict(self.unnamed_kernels),
                "unlinked_aten_kernels": dict(self.unlinked_aten_kernels),
                "dsl_share": self.share, "summed_share": self.summed_share, "profiled_calls": self.calls,
                "lowest_call_share": min(self.call_shares, default=0.0)}


@dataclass
class WallSplits:
    """Every executed call's wall time as the kernel process split it: inside the DSL's launches, and the rest
    (eager PyTorch, numpy, Python). The DSL's share of it is evidence, never a rule: at smoke shapes an honest call's
    fixed Python cost is as large as its kernel, and on a GPU a launch returns before the device work is done, so
    the "inside the DSL" part is the host's launch time there. On the CPU target the time outside the DSL in the
    median unprofiled call is set beside the reference's whole call (measured by the checker), as evidence."""

    dsl_us: list[float] = field(default_factory=list)
    other_us: list[float] = field(default_factory=list)
    unprofiled_other_us: list[float] = field(default_factory=list)  # the profiler's own cost is in the others
    reference_wall_us: float | None = None  # the reference's whole call, timed by the checker (CPU target)

    def add(self, reply: Any, profiled: bool = False) -> None:
        record = reply.get("wall") if isinstance(reply, dict) else None
        if isinstance(record, dict):
            self.dsl_us.append(microseconds(record.get("dsl_us")))
            self.other_us.append(microseconds(record.get("torch_compute_us")))
            if not profiled:
                self.unprofiled_other_us.append(self.other_us[-1])

    @property
    def median_outside_us(self) -> float | None:
        """Outside the DSL's launches, in the median unprofiled call (None before any)."""
        return statistics.median(self.unprofiled_other_us) if self.unprofiled_other_us else None

    def as_evidence(self) -> dict[str, Any]:
        shares = [_share(d, o) for d, o in zip(self.dsl_us, self.other_us)]
        return {"calls": len(shares), "dsl_wall_share_median": statistics.median(shares) if shares else None,
                "dsl_wall_share_min": min(shares, default=None),
                "dsl_us_median": statistics.median(self.dsl_us) if self.dsl_us else None,
                "other_us_median": statistics.median(self.other_us) if self.other_us else None,
                "outside_dsl_us_unprofiled": self.median_outside_us, "reference_wall_us": self.reference_wall_us,
                "outside_dsl_over_reference": (self.median_outside_us / self.reference_wall_us
                                               if self.median_outside_us is not None and self.reference_wall_us
                                               else None),
                "shares": [round(share, 4) for share in shares[:100]]}


def foreign_us(times: dict[str, float]) -> float:
    """The part of a record's DSL time in kernels no DSL compile produced (never more than the DSL time itself)."""
    return min(times["unnamed_us"], times["dsl_us"])


def _dsl_share(times: dict[str, float]) -> float:
    """A record's (or a sum of records') DSL share: time in kernels no DSL compile produced is work outside it."""
    foreign = foreign_us(times)
    return _share(times["dsl_us"] - foreign, times["torch_compute_us"] + foreign)


def _share(dsl_us: float, compute_us: float) -> float:
    total = dsl_us + compute_us
    return dsl_us / total if total > 0 else 0.0
