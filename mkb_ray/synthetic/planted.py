"""The paired rates a synthetic spec plants: help T and harm H per model, relative standing, closure enrichment and
reverse-direction coupling, derived from the spec alone — never from a run's records — so that a run's analysis
can be checked against them (`analysis/calibration.py`, docs/metrics.md "Planted-effect calibration").

How. A benchmark cell-replicate of model m in direction a2b is three independent synthetic attempts: the source
(solo in a), the base (solo in b) and the skill (in b, given the source's SKILL.md). The final tiers come from
`tier_probabilities()` — the generator's own function — and a passing attempt's speedup from the synthetic judge's
speed law (`speed.py`), so for each (source tier, base tier, number of closure claims k and of claims n in the
source SKILL.md) the probabilities of help and harm are:

- skill tier probabilities: `tier_probabilities(spec, b, "skill", closure_share=k/n, closure_claims=k,
  source_passed=..., model=m)`;
- a failing base: help = P(skill passes), harm = 0; a passing base: harm = P(skill fails) + P(both pass and the base
  reads faster by more than 1 + margin), help the mirror, with P(speed_x > (1 + margin) speed_y) for two attempts
  at one problem from the synthetic judge's speed law (`speed.faster_prob`: the problem's speeds shared, the
  attempts' spreads and the judge's noise independent; one eager time per problem, so kernel times compare as
  speedups; the judge's rounding of kernel times to 1e-6 ms is ignored) — a fixed-seed Monte Carlo whose standard
  error is below 0.0005;
- a source that writes an empty SKILL.md (`empty_skill_prob`) leaves its skill attempt skipped: neutral. Attempt
  errors (`llm_error_prob`) are drawn independently of everything else, so conditioning on resolved cells changes
  nothing.

Besides `faster_prob`, the one thing not worked out as a finite sum is the law of (n, k) in a fresh SKILL.md:
`fresh_claims` re-draws a claim whose idea the skill already says, which couples the categories of one file. It is
estimated by a Monte Carlo of `claim_draws` SKILL.md files (default 40,000), each drawn as `fresh_claims` draws one
— the Poisson count, then each claim's idea by the generator's own `draw_idea`, without the slots and wordings that
do not change a category — from a seed of its own (`PLANTED_SEED`, apart from any run's draws); that puts a standard
error of about 0.25 points on presence shares, far inside any run's intervals. Everything else is a finite sum. One
approximation: the reverse coupling treats a cell and its reverse as independent given the solos' tiers, while their
speed comparisons share the problem's speeds (it matters only where readings are held at a tier's band edge).

Pooling: every model and direction has the same number of cells in a benchmark run (models × problems × replicates),
so pooled rates weight them equally.
"""
from __future__ import annotations

import functools
import math
import random
from collections import Counter
from dataclasses import dataclass
from typing import Literal, Mapping, Optional, Sequence


from .outcome_draw import tier_probabilities
from .claims import _cover, draw_idea, poisson
from .speed import faster_prob
from .spec import CategoryWeights, SyntheticSpec, TierName, TierProbs, spec_taxonomy

PLANTED_SEED = 20_261_202
DEFAULT_CLAIM_DRAWS = 40_000
DIRECTIONS: tuple[str, str] = ("cutedsl2tirx", "tirx2cutedsl")
TIERS: tuple[TierName, ...] = ("fail", "pass", "pass2x")
_RANK = {"fail": 0, "pass": 1, "pass2x": 2}
Standing = Literal["above", "same", "below"]
STANDINGS: tuple[Standing, ...] = ("above", "same", "below")


def help_harm(skill: TierProbs, base_tier: TierName, spec: SyntheticSpec, margin: float) -> tuple[float, float]:
    """(P(help), P(harm)) of a skill attempt with tier probabilities `skill` against a base of tier `base_tier` at
    the same problem (analysis.outcomes.compare: a pass against a fail, or two passes whose kernel times differ by
    more than 1 + margin)."""
    passing = {"pass": skill.pass_, "pass2x": skill.pass2x}
    if base_tier == "fail":
        return skill.pass_ + skill.pass2x, 0.0
    helped = sum(p * faster_prob(spec, s, base_tier, margin) for s, p in passing.items())  # type: ignore[arg-type]
    harmed = skill.fail + sum(p * faster_prob(spec, base_tier, s, margin)  # type: ignore[arg-type]
                              for s, p in passing.items())
    return helped, harmed


# --- claims of a fresh SKILL.md ---------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=16)
def _claim_counts(weights: CategoryWeights, initial_claims_mean: float, taxonomy: str, draws: int, seed: int
                  ) -> tuple[tuple[tuple[int, int], float], ...]:
    spec = SyntheticSpec(category_weights=weights, initial_claims_mean=initial_claims_mean, taxonomy=taxonomy)
    closure = spec_taxonomy(taxonomy).closure_category
    rng = random.Random(seed)
    counts: Counter[tuple[int, int]] = Counter()
    for _ in range(draws):
        # fresh_claims, its categories only: the count, then each claim's idea as new_claim draws it.
        n = max(1, poisson(rng, spec.initial_claims_mean))
        taken: set[tuple[str, str]] = set()
        k = 0
        for _ in range(n):
            info = draw_idea(spec, rng, taken)
            _cover(taken, info.category, info.key)
            k += info.category == closure
        counts[n, k] += 1
    return tuple((key, m / draws) for key, m in sorted(counts.items()))


def claim_counts(spec: SyntheticSpec, draws: int = DEFAULT_CLAIM_DRAWS, seed: int = PLANTED_SEED
                 ) -> dict[tuple[int, int], float]:
    """P(n claims, k of them closures) of a fresh (solo) SKILL.md, by a Monte Carlo of `fresh_claims` (see the
    module docstring). Only the category weights, claim mean and taxonomy matter (ideas, not wordings or slots)."""
    return dict(_claim_counts(spec.category_weights, spec.initial_claims_mean, spec.taxonomy, draws, seed))


# --- the planted rates ------------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Atom:
    """One class of cell-replicates: model, direction, source and base tiers, whether the source SKILL.md holds a
    closure; `weight` its probability within (model, direction); `help` / `harm` the outcome probabilities in it."""

    model: str
    direction: str
    source_tier: TierName
    base_tier: TierName
    closure_present: bool
    weight: float
    help: float
    harm: float

    @property
    def standing(self) -> Standing:
        """The paper's grouping: the source against this atom's own base."""
        return _standing(self.source_tier, self.base_tier)


@dataclass(frozen=True)
class PlantedRates:
    """The rates a spec plants for some models (see the module docstring). Each method pools the models given
    (None: all) and both directions with equal weight."""

    models: tuple[str, ...]
    atoms: tuple[Atom, ...]

    def _pick(self, model: Optional[str], direction: Optional[str] = None) -> list[Atom]:
        if model is not None and model not in self.models:
            raise KeyError(f"no planted rates for model {model!r}")
        return [a for a in self.atoms if (model is None or a.model == model)
                and (direction is None or a.direction == direction)]

    def help_harm(self, model: Optional[str] = None, direction: Optional[str] = None) -> tuple[float, float]:
        """(T, H): the help and harm shares of resolved cell-replicates."""
        atoms = self._pick(model, direction)
        total = sum(a.weight for a in atoms)
        return sum(a.weight * a.help for a in atoms) / total, sum(a.weight * a.harm for a in atoms) / total

    def standing(self, group: Standing, model: Optional[str] = None, draw: str = "independent"
                 ) -> tuple[float, float, float]:
        """(share of cell-replicates in the group, help rate in it, harm rate in it). `draw`: "independent" groups
        by the source against an independent draw of the base (analysis/pairs.py: another replicate's base, whose
        tier law is the base's); "paper" against the pair's own base."""
        atoms = self._pick(model)
        total = sum(a.weight for a in atoms)
        if draw == "paper":
            placed = [(a, a.weight) for a in atoms if a.standing == group]
        elif draw == "independent":
            base_law = self._base_law()
            placed = [(a, a.weight * sum(p for tier, p in base_law[a.model, a.direction].items()
                                         if _standing(a.source_tier, tier) == group)) for a in atoms]
        else:
            raise ValueError(f"draw: {draw!r} is not 'independent' or 'paper'")
        mass = sum(w for _, w in placed)
        if mass == 0:
            return 0.0, math.nan, math.nan
        return (mass / total, sum(w * a.help for a, w in placed) / mass, sum(w * a.harm for a, w in placed) / mass)

    def _base_law(self) -> dict[tuple[str, str], dict[str, float]]:
        """P(base tier) per (model, direction): the law of an independent base draw."""
        law: dict[tuple[str, str], dict[str, float]] = {}
        for a in self.atoms:
            by_tier = law.setdefault((a.model, a.direction), {})
            by_tier[a.base_tier] = by_tier.get(a.base_tier, 0.0) + a.weight
        for by_tier in law.values():
            total = sum(by_tier.values())
            for tier in by_tier:
                by_tier[tier] /= total
        return law

    def enrichment(self, model: Optional[str] = None) -> tuple[float, float, float]:
        """(presence | help, presence | harm, enrichment = presence | harm - presence | help) of the closure
        category in the source SKILL.md, presence meaning at least one closure claim (ground truth)."""
        atoms = self._pick(model)
        helped = sum(a.weight * a.help for a in atoms)
        harmed = sum(a.weight * a.harm for a in atoms)
        p_help = sum(a.weight * a.help for a in atoms if a.closure_present) / helped
        p_harm = sum(a.weight * a.harm for a in atoms if a.closure_present) / harmed
        return p_help, p_harm, p_harm - p_help

    def reverse(self, model: Optional[str] = None, direction: Optional[str] = None, given: str = "help"
                ) -> dict[str, float]:
        """Of the cell-replicates with outcome `given` in a direction (None: both), the shares of their reverse
        (same model, problem, replicate; the other direction) helped, harmed and neutral. Given the two solos'
        tiers, a cell and its reverse are independent (each uses the other solo's tier only, and its own skill
        attempt), so the joint is a sum over the two tiers."""
        if model is not None:
            self._pick(model)   # an unknown model raises
        models = self.models if model is None else (model,)
        joint = {"help": 0.0, "harm": 0.0, "neutral": 0.0}
        for m in models:
            for d in ([direction] if direction else DIRECTIONS):
                rev = _reverse_name(d)
                forward, backward = _by_tiers(self._pick(m, d)), _by_tiers(self._pick(m, rev))
                if not backward:
                    raise ValueError(f"reverse coupling needs both directions; no planted rates for {rev}")
                for (src, base), (w, h, x) in forward.items():
                    p_given = {"help": h, "harm": x, "neutral": 1.0 - h - x}[given]
                    _, rh, rx = backward[base, src]
                    joint["help"] += w * p_given * rh
                    joint["harm"] += w * p_given * rx
                    joint["neutral"] += w * p_given * (1.0 - rh - rx)
        total = sum(joint.values())
        return {k: v / total for k, v in joint.items()}


def _standing(source_tier: str, base_tier: str) -> Standing:
    s, b = _RANK[source_tier], _RANK[base_tier]
    return "above" if s > b else ("below" if s < b else "same")


def _reverse_name(direction: str) -> str:
    source, target = direction.split("2")
    return f"{target}2{source}"


def _by_tiers(atoms: Sequence[Atom]) -> dict[tuple[str, str], tuple[float, float, float]]:
    """(source tier, base tier) -> (weight, P(help | tiers), P(harm | tiers)), the closure presence summed out."""
    out: dict[tuple[str, str], list[float]] = {}
    for a in atoms:
        acc = out.setdefault((a.source_tier, a.base_tier), [0.0, 0.0, 0.0])
        acc[0] += a.weight
        acc[1] += a.weight * a.help
        acc[2] += a.weight * a.harm
    return {k: (w, h / w, x / w) if w else (0.0, 0.0, 0.0) for k, (w, h, x) in out.items()}


def planted_rates(spec: SyntheticSpec, models: Sequence[str], margin: float,
                  directions: Sequence[str] = DIRECTIONS, claim_draws: int = DEFAULT_CLAIM_DRAWS,
                  seed: int = PLANTED_SEED, claim_law: Optional[Mapping[tuple[int, int], float]] = None
                  ) -> PlantedRates:
    """The rates `spec` plants for a benchmark of `models` in `directions`, with help and harm judged at `margin` (the
    analysis judges synthetic attempts at the GPU judge's measured margin, `PairingRules.margin`). `claim_law`: P(n
    claims, k closures) of a fresh SKILL.md when it is known exactly (default: `claim_counts(spec, claim_draws,
    seed)`). Raises ValueError for a spec whose verdicts are not drawn (`judge: real`) or that has problem effects."""
    if spec.judge != "synthetic":
        raise ValueError("planted rates need drawn verdicts (synthetic.judge: synthetic); a real judge decides the "
                         "tiers itself")
    if spec.problem_difficulty_sigma or spec.model_problem_sigma:
        # The sums below treat every problem alike; with problem effects the rates are integrals over them, which
        # benchmarks/metric_coverage.py takes from a very large drawn world instead (synthetic/worlds.py).
        raise ValueError("planted rates have no closed form with per-problem difficulty or model × problem effects "
                         "(problem_difficulty_sigma, model_problem_sigma): draw a large world instead")
    counts = dict(claim_law) if claim_law is not None else claim_counts(spec, claim_draws, seed)
    if abs(sum(counts.values()) - 1.0) > 1e-9 or any(n < 1 or not 0 <= k <= n for n, k in counts):
        raise ValueError("claim_law must be probabilities over (n >= 1 claims, 0 <= k <= n closures) summing to 1")
    keep = 1.0 - spec.empty_skill_prob
    atoms = []
    for model in models:
        effect = spec.effect(model)
        for direction in directions:
            source_dsl, target_dsl = direction.split("2")
            src_probs, base_probs = effect.solo[source_dsl], effect.solo[target_dsl]
            for src in TIERS:
                p_src = _tier_prob(src_probs, src)
                for base in TIERS:
                    p_base = _tier_prob(base_probs, base)
                    if p_src * p_base == 0:
                        continue
                    sums = {False: [0.0, 0.0, 0.0], True: [0.0, 0.0, 0.0]}
                    for (n, k), p_claims in counts.items():
                        skill = tier_probabilities(spec, target_dsl, "skill", closure_share=k / n,
                                                   closure_claims=k, source_passed=src != "fail", model=model)
                        h, x = help_harm(skill, base, spec, margin)
                        acc = sums[k > 0]
                        acc[0] += p_claims
                        acc[1] += p_claims * h * keep
                        acc[2] += p_claims * x * keep
                    for present, (w, h, x) in sums.items():
                        if w > 0:
                            atoms.append(Atom(model, direction, src, base, present, p_src * p_base * w, h / w,
                                              x / w))
    return PlantedRates(tuple(models), tuple(atoms))


def _tier_prob(probs: TierProbs, tier: str) -> float:
    return {"fail": probs.fail, "pass": probs.pass_, "pass2x": probs.pass2x}[tier]
