"""What one paired comparison says — the definitions every metric aggregates (docs/metrics.md, "Paired outcomes").

- `outcome(cr)`: help, harm or neutral of one resolved cell-replicate (`compare`: a pass against a fail, or two
  passes whose final kernel times differ by more than the measured noise margin, `PairingRules.margin`).
- `log_ratio(cr, eager_ms)`: its ΔGM term, log(base end-to-end / skill end-to-end) (`end_to_end_ms`).
- `standing_between(source, base)`: the source's tier against a base's, above / same / below.

The order the two share: fail < a pass no faster than eager < faster passes by speed (and pass2x above pass for
standing). T/H and ΔGM never disagree in sign on one pair: where `compare` says help, the pair's log ratio is ≥ 0;
where it says harm, ≤ 0 (tests/test_paired.py checks every combination of tiers and speeds).
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal, Optional, Sequence

import numpy as np

from .cells import Attempt, CellReplicate
from .noise_margins import NoiseMargins, load_noise_margins

Outcome = Literal["help", "harm", "neutral"]
OUTCOMES: tuple[Outcome, ...] = ("help", "harm", "neutral")
Standing = Literal["above", "same", "below"]
STANDINGS: tuple[Standing, ...] = ("above", "same", "below")


@dataclass(frozen=True)
class PairingRules:
    """The config values of the paired comparison (recorded with every table). `noise` None: the measured margin of
    each comparison (`margin`)."""

    noise: Optional[float] = None      # a fixed 'faster' margin: base_ms / skill_ms > 1 + noise
    fail_factor: float = 1.0           # a failed attempt's end-to-end time, as a multiple of the eager time (≥ 1)
    # A pass slower than eager runs at eager speed in ΔGM (min(kernel, eager)); False: its own time, the paper's
    # unclipped reading, under which ΔGM and T/H can disagree in sign (docs/metrics.md).
    slow_pass_runs_eager: bool = True
    # The judge's measured timing noise per target and kernel-time class (analysis/noise_margins.json).
    margins: NoiseMargins = field(default_factory=load_noise_margins, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.fail_factor >= 1.0:
            # Below 1 a failed attempt would score faster than a pass at eager speed: the order T/H and ΔGM share
            # (module docstring) would break.
            raise ValueError(f"fail_factor {self.fail_factor} must be at least 1 (a fail is never faster than "
                             "falling back to eager)")

    def margin(self, target: str, synthetic: bool, *kernel_ms: Optional[float]) -> float:
        """How much faster one of two passing kernels judged at `kernel_ms` on `target` must be to count as faster:
        the fixed `noise` when one is set; for attempts of the synthetic judge, the GPU judge's widest measured
        margin, whatever the target (the synthetic judge stands in for the GPU judge: its reading noise has that
        pair-p95, SyntheticSpec.judge_noise_margin); else the measured margin of the noisier of the kernels' time
        classes."""
        if self.noise is not None:
            return self.noise
        if synthetic:
            return self.margins.margin("gpu")
        return self.margins.margin(target, *kernel_ms)

    def margin_of(self, cr: CellReplicate) -> float:
        """`margin` for a cell-replicate's base and skill attempts."""
        pair = [a for a in (cr.base, cr.skill) if a is not None]
        return self.margin(cr.target, any(a.synthetic for a in pair), *(a.kernel_ms for a in pair))


def compare(skill_passed: bool, base_passed: bool, skill_ms: Optional[float], base_ms: Optional[float],
            noise: float) -> Outcome:
    """The one definition of help and harm, for benchmark cells and chain hops alike: a pass against a fail, or
    two passes whose final kernel times differ by a ratio above 1 + noise."""
    if skill_passed != base_passed:
        return "help" if skill_passed else "harm"
    if skill_passed and skill_ms and base_ms:
        if base_ms / skill_ms > 1 + noise:
            return "help"
        if skill_ms / base_ms > 1 + noise:
            return "harm"
    return "neutral"


def outcome(cr: CellReplicate, rules: PairingRules = PairingRules()) -> Outcome:
    """Help, harm or neutral for one resolved cell-replicate; a skipped skill attempt is neutral (nothing was
    transferred)."""
    base, skill = cr.base, cr.skill
    if base is None or skill is None or skill.skipped:
        return "neutral"
    return compare(skill.passed, base.passed, skill.kernel_ms, base.kernel_ms, rules.margin_of(cr))


def end_to_end_ms(attempt: Attempt, eager_ms: Optional[float], rules: PairingRules) -> Optional[float]:
    """What running the attempt's result costs: a pass runs the faster of its kernel and eager PyTorch
    (min(kernel, eager): nobody deploys a kernel slower than the fallback; `slow_pass_runs_eager` False: its
    kernel time whatever it is), a fail falls back to eager at
    `fail_factor` × eager (≥ 1). So a fail is never better than a pass, as T/H have it: with fail_factor 1 a fail
    ties with a pass no faster than eager, above 1 it is strictly worse. `eager_ms` is one time per (target,
    problem) of the run (`problem_eager_ms`), the same for both arms: each attempt's own eager measurement differs
    by the judge's noise (and the cached baseline is re-measured now and then), which made a fail against a fail
    read as a speed change. None when the run never measured an eager time for the problem and the attempt did
    not pass."""
    if attempt.passed and attempt.kernel_ms:
        return min(attempt.kernel_ms, eager_ms) if eager_ms and rules.slow_pass_runs_eager else attempt.kernel_ms
    return eager_ms * rules.fail_factor if eager_ms else None


def log_ratio(cr: CellReplicate, eager_ms: Optional[float], rules: PairingRules) -> Optional[float]:
    """log(base e2e / skill e2e) of one resolved cell-replicate; 0 for a skipped skill attempt; None when a time
    is unknown (no eager time was ever measured for the problem)."""
    base, skill = cr.base, cr.skill
    if base is None or skill is None:
        return None
    if skill.skipped:
        return 0.0
    b, s = end_to_end_ms(base, eager_ms, rules), end_to_end_ms(skill, eager_ms, rules)
    return math.log(b / s) if b and s else None


def problem_eager_ms(replicates: Sequence[CellReplicate]) -> dict[tuple[str, str], float]:
    """The median eager time per (target, problem) over every attempt that measured one: the eager time of
    `end_to_end_ms`, one value for both arms."""
    seen: dict[tuple[str, str], list[float]] = defaultdict(list)
    for cr in replicates:
        for a in (cr.source, cr.base, cr.skill):
            if a is not None and a.eager_ms:
                seen[cr.target, cr.problem_id].append(a.eager_ms)
    return {k: float(np.median(v)) for k, v in seen.items()}


def standing_between(source: Attempt, base: Attempt) -> Standing:
    """The source's tier against a base's, on fail < pass < pass2x."""
    s, b = source.rank, base.rank
    return "above" if s > b else ("below" if s < b else "same")
