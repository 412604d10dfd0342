"""How fast a synthetic judge says a passing kernel is, and how likely one such kernel reads faster than another.

The law (issue 27 item 4). Every problem has one speed per passing tier, drawn once per (seed, problem, tier) and
shared by every model, DSL and arm: a pass speed log-uniform in [pass_speedup_min, 2), a pass2x speed
2·exp(|N(0, pass2x_speedup_sigma)|). An attempt's kernel is that speed times exp(attempt_speed_sigma · Z): kernels
for one problem differ by how they were written. The judge then reads it with noise exp(σ_n · Z'), σ_n set so that
two judgements of one kernel differ by more than `judge_noise_margin` in 5 % of pairs — the statistic the real
judge's margin is (analysis/noise_margins.json: the pair-p95 of a kernel's speedup over repeat judgements), so the
analysis can compare synthetic attempts at the measured margin and mean by "faster" what it means on the GPU. The
reading is kept inside its tier's band (a pass below 2, at most 1.9999; a pass2x at 2 or above), as the real judge
names the tier from the speed it read.

Without a shared problem speed, two passes of one problem would differ as much as two passes of different problems
do, and nearly every pass-against-pass pair would be decided by a margin of a few percent
(benchmarks/results/2026-12-05-cpu-synthetic-margin-sensitivity.txt).

`faster_prob` gives P(one attempt reads faster than another by the margin) for two attempts at one problem, by a
fixed-seed Monte Carlo over the law (common random numbers: the same draws for every spec, so a fit moves smoothly),
with a standard error below 0.0005.
"""
from __future__ import annotations

import functools
import math
import random
from typing import Literal

import numpy as np

from .seeding import stable_int
from .spec import SyntheticSpec

PassingTier = Literal["pass", "pass2x"]
# The largest speedup a pass is read at: the judge calls 2.0 and above pass2x.
PASS_CEILING = 1.9999
# z of the two-sided 95 % point of a normal: |N(0, 1)| < 1.96 in 95 % of draws.
_Z95 = 1.959963984540054
_DRAWS = 1_000_000
_DRAW_SEED = 20_261_205


def noise_sigma(margin: float) -> float:
    """σ_n of the judge's log-normal reading noise whose pair-p95 is `margin`: two readings of one kernel differ in
    log by N(0, 2σ_n²), so |ratio - 1| exceeds exp(1.96·√2·σ_n) - 1 = margin in 5 % of pairs."""
    if margin < 0:
        raise ValueError(f"a noise margin must be >= 0, got {margin}")
    return math.log1p(margin) / (_Z95 * math.sqrt(2.0))


@functools.lru_cache(maxsize=65536)
def problem_speed(seed: int, problem_id: str, tier: PassingTier, pass_speedup_min: float,
                  pass2x_speedup_sigma: float) -> float:
    """The speedup of `problem_id`'s kernels of a passing tier, before each attempt's own spread: one draw per
    (seed, problem, tier), the same on every machine."""
    rng = random.Random(stable_int("mkb-synthetic-speed", seed, problem_id, tier))
    if tier == "pass":
        return min(math.exp(rng.uniform(math.log(pass_speedup_min), math.log(2.0))), PASS_CEILING)
    return 2.0 * math.exp(abs(rng.gauss(0.0, pass2x_speedup_sigma)))


def _in_band(speedup: float, tier: PassingTier) -> float:
    return min(speedup, PASS_CEILING) if tier == "pass" else max(speedup, 2.0)


def judged_speedup(rng: random.Random, spec: SyntheticSpec, seed: int, problem_id: str, tier: PassingTier) -> float:
    """The speedup the synthetic judge reads for one passing kernel of `tier` at `problem_id` (module docstring);
    two normal draws from `rng`: the kernel's own spread, then the reading's noise."""
    speed = problem_speed(seed, problem_id, tier, spec.pass_speedup_min, spec.pass2x_speedup_sigma)
    kernel = spec.attempt_speed_sigma * rng.gauss(0.0, 1.0)
    reading = noise_sigma(spec.judge_noise_margin) * rng.gauss(0.0, 1.0)
    log_spread = kernel + reading
    return _in_band(speed * math.exp(log_spread), tier)


@functools.lru_cache(maxsize=1)
def _common_draws() -> tuple[np.ndarray, ...]:
    """Fixed standard draws: a uniform for each problem's pass speed, a normal for its pass2x speed, and a normal
    per attempt for two attempts."""
    rng = np.random.default_rng(_DRAW_SEED)
    return (rng.random(_DRAWS), rng.standard_normal(_DRAWS), rng.standard_normal(_DRAWS), rng.standard_normal(_DRAWS))


@functools.lru_cache(maxsize=256)
def _faster_prob(x: PassingTier, y: PassingTier, pass_speedup_min: float, pass2x_sigma: float, spread: float,
                 margin: float) -> float:
    u, n, z1, z2 = _common_draws()
    log_speed = {"pass": np.minimum(np.log(pass_speedup_min) + u * math.log(2.0 / pass_speedup_min),
                                    math.log(PASS_CEILING)),
                 "pass2x": math.log(2.0) + pass2x_sigma * np.abs(n)}
    ceiling, floor = math.log(PASS_CEILING), math.log(2.0)

    def read(tier: PassingTier, z: np.ndarray) -> np.ndarray:
        value = log_speed[tier] + spread * z
        return np.minimum(value, ceiling) if tier == "pass" else np.maximum(value, floor)

    return float(np.mean(read(x, z1) - read(y, z2) > math.log1p(margin)))


def faster_prob(spec: SyntheticSpec, x: PassingTier, y: PassingTier, margin: float) -> float:
    """P(a kernel of tier x reads more than 1 + margin times as fast as one of tier y), two attempts at the same
    problem (they share its speeds; their spreads and the judge's noise are independent)."""
    if x not in ("pass", "pass2x") or y not in ("pass", "pass2x"):
        raise ValueError(f"faster_prob takes passing tiers, got {x!r}, {y!r}")
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    if x == "pass" and y == "pass2x":
        return 0.0   # a pass reads below 2, a pass2x at or above it
    spread = math.hypot(spec.attempt_speed_sigma, noise_sigma(spec.judge_noise_margin))
    return _faster_prob(x, y, spec.pass_speedup_min, spec.pass2x_speedup_sigma, spread, margin)
