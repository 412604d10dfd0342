"""Small synthetic worlds: a whole benchmark's cell-replicates drawn in memory, in milliseconds, with known truth.

A *world* is what a benchmark run of `models` × `n_problems` × both directions × `replicates` hands the analysis
(source, base and skill attempt of every cell-replicate, and the claim categories of every source SKILL.md), but
drawn straight from a `SyntheticSpec` — no trials, store, records or SKILL.md text. It is synthetic: every attempt
is a draw, marked `synthetic=True`, never something that ran.

Why. The analysis reports T, H, ΔGM, standing, enrichment and reverse coupling with 95% intervals; whether those
intervals cover, and whether the point estimates are biased, can only be checked against worlds whose truth is
known, and many of them (a benchmark runs >= 200). The truth of a world *law* (spec, models, problem count) is what
the same metrics give on a very large world of that law (e.g. 5000 problems), which also integrates over the
problem difficulties and model × problem effects (`SyntheticSpec.problem_difficulty_sigma`) that `planted.py`'s
closed forms do not cover. `null_spec` gives the law in which skills do nothing, whose truth is known exactly:
help = harm, standing and enrichment flat.

How a world is drawn, matching what synthetic mode draws for a benchmark run (`attempt.synthetic_outcome`):
each problem's logit shift e (`attempt.problem_effect`) and eager time (`attempt._eager_ms`) are seeded by the world
seed and the problem (shared by every model), so each world has problems of its own; each (model, problem,
replicate) has a solo attempt per DSL, whose SKILL.md's (claims, closure claims) are drawn from the law of a fresh
SKILL.md (`planted.claim_counts`), and a skill attempt per direction whose tier comes from `tier_probabilities`
given that source; a passing attempt's speedup follows the synthetic judge's law (`speed.judged_speedup`, with the
problem's speeds seeded by the world seed, as `outcome_draw._verdict` seeds them by the spec's). What a
world leaves out: attempt errors and empty SKILL.md files (every attempt completes), submissions, durations, tokens,
and the skill attempts' own SKILL.md (single-hop metrics read only the source's).

The analysis's `Attempt` and `CellReplicate` cannot be imported here (the analysis imports this package, and
tests/test_layers.py forbids the cycle): a world holds the plain `DrawnAttempt` / `DrawnCell`, with the same field
names, and `World.replicates(Attempt, CellReplicate)` builds the analysis's objects from them.
"""
from __future__ import annotations

import bisect
import random
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, TypeVar

from .outcome_draw import _eager_ms, problem_effect, tier_probabilities
from .planted import DIRECTIONS, claim_counts
from .speed import judged_speedup
from .spec import ModelEffect, PerModel, SyntheticSpec, TierName, TierOverrides, TierProbs, spec_taxonomy

DSLS: tuple[str, str] = ("cutedsl", "tirx")
FAMILIES = 6
OTHER_CATEGORY = "other"    # categories_of's entry for a SKILL.md without a closure claim
_SKILL_KNOBS = ("skill_help_shift", "source_pass_shift", "closure_harm_per_share", "closure_harm_per_claim")

A = TypeVar("A")
C = TypeVar("C")


@dataclass(frozen=True, slots=True)
class DrawnAttempt:
    """One drawn attempt: the fields of `analysis.cells.Attempt` a world fills (the rest keep Attempt's defaults).
    `kernel_ms` and `speedup` are None for a fail; `skill_sha` names a solo attempt's SKILL.md (None for skills)."""

    trial_id: str
    tier: TierName
    speedup: Optional[float]
    kernel_ms: Optional[float]
    eager_ms: float
    skill_sha: Optional[str]
    status: str = "completed"
    synthetic: bool = True

    @property
    def passed(self) -> bool:
        return self.tier != "fail"


@dataclass(frozen=True, slots=True)
class DrawnCell:
    """One cell-replicate, in the field order of `analysis.cells.CellReplicate`. Direction a2b: source = solo in a,
    base = solo in b (the source of b2a of the same replicate), skill = the skill attempt in b."""

    model: str
    target: str
    problem_id: str
    family: str
    direction: str
    replicate: int
    source: DrawnAttempt
    base: DrawnAttempt
    skill: DrawnAttempt


@dataclass(frozen=True)
class World:
    """A drawn benchmark. `cells` in the order (model, problem, direction, replicate); `categories_of` maps each
    source SKILL.md's sha to the categories present in it: {closure category} or {OTHER_CATEGORY}."""

    cells: tuple[DrawnCell, ...]
    categories_of: dict[str, frozenset[str]]

    def replicates(self, attempt_type: Callable[..., A], cell_type: Callable[..., C]) -> tuple[C, ...]:
        """The cells as the analysis's objects: `world.replicates(Attempt, CellReplicate)` (see module docstring)."""
        def make(a: DrawnAttempt) -> A:
            return attempt_type(trial_id=a.trial_id, status=a.status, tier=a.tier, speedup=a.speedup,
                                kernel_ms=a.kernel_ms, eager_ms=a.eager_ms, skill_sha=a.skill_sha,
                                synthetic=a.synthetic)
        made: dict[str, A] = {}   # each solo attempt is the source of one cell and the base of another: build once

        def once(a: DrawnAttempt) -> A:
            if a.trial_id not in made:
                made[a.trial_id] = make(a)
            return made[a.trial_id]
        return tuple(cell_type(c.model, c.target, c.problem_id, c.family, c.direction, c.replicate, once(c.source),
                               once(c.base), make(c.skill)) for c in self.cells)


def problem_names(n_problems: int) -> list[str]:
    """`fam{i % 6}/{i:02d}_p`: six families (the part before '/'), problems spread over them in turn."""
    return [f"fam{i % FAMILIES}/{i:02d}_p" for i in range(n_problems)]


class _ClaimLaw:
    """Draws (claims n, closure claims k) of a fresh SKILL.md from `planted.claim_counts` by inverse CDF."""

    def __init__(self, spec: SyntheticSpec) -> None:
        law = claim_counts(spec)
        self.outcomes = list(law)
        self.cumulative: list[float] = []
        total = 0.0
        for key in self.outcomes:
            total += law[key]
            self.cumulative.append(total)

    def draw(self, rng: random.Random) -> tuple[int, int]:
        i = bisect.bisect_right(self.cumulative, rng.random() * self.cumulative[-1])
        return self.outcomes[min(i, len(self.outcomes) - 1)]


def _draw_tier(rng: random.Random, probs: TierProbs) -> TierName:
    r = rng.random()
    return "fail" if r < probs.fail else "pass" if r < probs.fail + probs.pass_ else "pass2x"


def _attempt(rng: random.Random, spec: SyntheticSpec, seed: int, problem: str, trial_id: str, probs: TierProbs,
             eager_ms: float, skill_sha: Optional[str]) -> DrawnAttempt:
    tier = _draw_tier(rng, probs)
    if tier == "fail":
        return DrawnAttempt(trial_id, tier, None, None, eager_ms, skill_sha)
    speedup = judged_speedup(rng, spec, seed, problem, tier)  # the synthetic judge's law (synthetic/speed.py)
    # Rounded as the synthetic judge's verdict is, so a world reads like a synthetic run's records.
    return DrawnAttempt(trial_id, tier, round(speedup, 4), round(eager_ms / speedup, 6), eager_ms, skill_sha)


def draw_world(spec: SyntheticSpec, models: Sequence[str], n_problems: int, replicates: int, seed: int,
               target: str = "gpu") -> World:
    """A world of `models` × `n_problems` (`problem_names`) × both directions × `replicates` cell-replicates, drawn
    from `spec` (its own `seed` is not used: `seed` seeds everything, so worlds of one law differ only by it).
    Deterministic per (spec, models, n_problems, replicates, seed)."""
    if n_problems < 1 or replicates < 1:
        raise ValueError(f"n_problems and replicates must be >= 1, got {n_problems} and {replicates}")
    rng = random.Random(seed)
    claims = _ClaimLaw(spec)
    closure = spec_taxonomy(spec.taxonomy).closure_category
    present = {True: frozenset({closure}), False: frozenset({OTHER_CATEGORY})}
    pairs = [(d, *d.split("2")) for d in DIRECTIONS]
    cells: list[DrawnCell] = []
    categories_of: dict[str, frozenset[str]] = {}
    for model in models:
        for problem in problem_names(n_problems):
            family = problem.partition("/")[0]
            e = problem_effect(seed, model, problem, spec.problem_difficulty_sigma, spec.model_problem_sigma)
            eager = _eager_ms(seed, problem, spec.eager_ms_median, spec.eager_ms_sigma)
            solo_probs = {d: tier_probabilities(spec, d, "solo", model=model, problem_effect=e) for d in DSLS}
            by_direction: dict[str, list[DrawnCell]] = {d: [] for d, _, _ in pairs}
            for r in range(replicates):
                solos: dict[str, DrawnAttempt] = {}
                counts: dict[str, tuple[int, int]] = {}
                for dsl in DSLS:
                    sha = f"{model}|{problem}|{dsl}|{r}"
                    solos[dsl] = _attempt(rng, spec, seed, problem, f"{sha}|solo", solo_probs[dsl], eager, sha)
                    counts[dsl] = claims.draw(rng)
                    categories_of[sha] = present[counts[dsl][1] > 0]
                for direction, a, b in pairs:
                    n, k = counts[a]
                    probs = tier_probabilities(spec, b, "skill", closure_share=k / n, closure_claims=k,
                                               source_passed=solos[a].passed, model=model, problem_effect=e)
                    skill = _attempt(rng, spec, seed, problem, f"{model}|{problem}|{direction}|{r}|skill", probs,
                                     eager, None)
                    by_direction[direction].append(DrawnCell(model, target, problem, family, direction, r,
                                                             solos[a], solos[b], skill))
            for direction, _, _ in pairs:
                cells.extend(by_direction[direction])
    return World(tuple(cells), categories_of)


def null_spec(spec: SyntheticSpec) -> SyntheticSpec:
    """`spec` with skills that do nothing: every skill-arm table entry (the spec's and each `per_model` model's) is
    the solo entry of the same DSL and model, and the skill-effect knobs are 0, so a skill attempt is drawn exactly
    as its base is. Problem effects and everything else are kept: the null world of the same law."""
    tiers = spec.tiers.model_copy(update={f"{d}_skill": spec.tiers.get(d, "solo") for d in DSLS})
    per_model: dict[str, ModelEffect] = {}
    for model, own in spec.per_model.root.items():
        solo = spec.effect(model).solo
        overrides = (own.tiers or TierOverrides()).model_copy(update={f"{d}_skill": solo[d] for d in DSLS})
        # None: the spec's knob, which is 0 below.
        per_model[model] = own.model_copy(update={"tiers": overrides, **{k: None for k in _SKILL_KNOBS}})
    return spec.model_copy(update={"tiers": tiers, "per_model": PerModel(per_model),
                                   **{k: 0.0 for k in _SKILL_KNOBS}})
