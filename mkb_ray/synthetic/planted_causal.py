"""The effect a synthetic intervention pair plants: what the generator's own law says the paired comparison of an
intervention attempt and its control should show, given the texts each actually read (issue 29).

Both attempts of a pair are independent draws at one problem. The generator (`outcome_draw.synthetic_outcome`)
gives a skill attempt reading text T the tier probabilities `tier_probabilities(spec, dsl, "skill", ...)` with the
closure claims and the source tier it parses from T (`parse_skill(T, strict=False)`: claims an edit cut are gone),
and a solo attempt (a budget-matched solo) the solo table. A skill attempt whose text is empty is skipped and stands
as its cell's solo base (analysis/causal.py), so it is a solo draw — and when both attempts of a pair stand for the
same base they are one attempt: a tie. Passing speeds follow the synthetic judge's law (`speed.faster_prob`).

So for one pair, with p_X and p_C the two attempts' tier probabilities:
    help = sum_c p_C(c) * P(X beats an attempt of tier c)   (planted.help_harm), harm likewise, net = help - harm,
    d_pass = P_pass(X) - P_pass(C).
The planted effect of a row of the causal table is the mean of these over the row's pairs: the average effect on the
pairs the run drew, which is what the table estimates. Computed from the texts and the spec, never from outcomes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .outcome_draw import problem_effect, tier_probabilities
from .planted import help_harm
from .skill_md import parse_skill, skill_source_tier
from .spec import SyntheticSpec, TierProbs, spec_taxonomy


@dataclass(frozen=True, slots=True)
class PairTruth:
    help: float
    harm: float
    d_pass: float

    @property
    def net(self) -> float:
        return self.help - self.harm


TIE = PairTruth(0.0, 0.0, 0.0)


def attempt_probs(spec: SyntheticSpec, model: str, problem_id: str, dsl: str, text: Optional[str]) -> TierProbs:
    """The final-tier probabilities of an attempt at (model, problem, dsl) reading `text` (None: a solo; '' or
    blank: a skipped skill attempt, i.e. its cell's solo base)."""
    shift = problem_effect(spec.seed, model, problem_id, spec.problem_difficulty_sigma, spec.model_problem_sigma)
    if text is None or not text.strip():
        return tier_probabilities(spec, dsl, "solo", model=model, problem_effect=shift)
    claims = parse_skill(text, strict=False)
    closure = spec_taxonomy(spec.taxonomy).closure_category
    k = sum(c.category == closure for c in claims)
    return tier_probabilities(spec, dsl, "skill", closure_share=k / len(claims) if claims else 0.0,
                              source_passed=skill_source_tier(text) in ("pass", "pass2x"), closure_claims=k,
                              model=model, problem_effect=shift)


def pair_truth(spec: SyntheticSpec, model: str, problem_id: str, dsl: str, treated: Optional[str],
               control: Optional[str], margin: float) -> PairTruth:
    """The planted effect of one pair: the treated attempt read `treated`, the control `control` (None: a solo;
    '': skipped, standing as the cell's solo base — two such are the same attempt)."""
    stands_for_base = [t is not None and not t.strip() for t in (treated, control)]
    if all(stands_for_base):
        return TIE
    p_x = attempt_probs(spec, model, problem_id, dsl, treated)
    p_c = attempt_probs(spec, model, problem_id, dsl, control)
    help_, harm = 0.0, 0.0
    for tier, weight in (("fail", p_c.fail), ("pass", p_c.pass_), ("pass2x", p_c.pass2x)):
        if weight > 0:
            h, m = help_harm(p_x, tier, spec, margin)  # type: ignore[arg-type]
            help_, harm = help_ + weight * h, harm + weight * m
    return PairTruth(help_, harm, (p_x.pass_ + p_x.pass2x) - (p_c.pass_ + p_c.pass2x))
