"""What synthetic mode draws from: calibrated distributions replacing model servers and judges.

Every record produced under synthetic mode carries `synthetic: true` (AttemptRecord.synthetic, the store's trial
rows, exports and reports), so synthetic numbers can never pass for measured ones.

Calibration. The defaults below are ASSUMPTIONS, loosely shaped after what MetaKernelBench reports (pass rates
low-ish, pass2x rarer still, TIRx harder than CuTe DSL, a SKILL.md helping about as often as it harms, attempts of
a few submissions over tens of minutes). They are not measurements; a campaign that plans GPU-hours from them
should replace them with numbers from its own pilot run.

The taxonomy names (`CATEGORIES`) and modalities (`MODALITIES`) live here because the spec weights them; the claim
templates that use them are in `claims.py`.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Category = Literal["workload_census", "hardware_mapping", "performance_evidence", "verified_reformulation",
                   "unverified_reformulation", "bounded_failure_diagnosis", "verification_recipe",
                   "unsupported_closure", "unsupported_claim", "dsl_specific_detail", "open_question"]
CATEGORIES: tuple[Category, ...] = (
    "workload_census", "hardware_mapping", "performance_evidence", "verified_reformulation",
    "unverified_reformulation", "bounded_failure_diagnosis", "verification_recipe", "unsupported_closure",
    "unsupported_claim", "dsl_specific_detail", "open_question")
# Ordered weakest to strongest: strengthening moves one step right, weakening one step left.
Modality = Literal["hedged", "plain", "absolute"]
MODALITIES: tuple[Modality, ...] = ("hedged", "plain", "absolute")
TierName = Literal["fail", "pass", "pass2x"]

_SUM_TOL = 1e-6


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TierProbs(_Spec):
    """Probabilities of an attempt's final tier (each in [0, 1], summing to 1). YAML keys: fail, pass, pass2x."""

    # `pass` is a Python keyword: the field is `pass_`, read and written as `pass` (by name too, for code).
    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True,
                              serialize_by_alias=True)
    fail: float = Field(ge=0, le=1, description="probability that the final kernel fails (probability)")
    pass_: float = Field(ge=0, le=1, alias="pass", description="probability of a pass with speedup < 2 "
                                                                "(probability)")
    pass2x: float = Field(ge=0, le=1, description="probability of a pass with speedup >= 2 (probability)")

    @model_validator(mode="after")
    def _sums_to_one(self) -> "TierProbs":
        total = self.fail + self.pass_ + self.pass2x
        if abs(total - 1.0) > _SUM_TOL:
            raise ValueError(f"fail + pass + pass2x must sum to 1, got {total:.6g}")
        return self


class TierTable(_Spec):
    """Final-tier probabilities per (dsl, arm), before the skill effect (see SyntheticSpec.skill_help_shift)."""

    # Assumptions: CuTe DSL slightly easier than TIRx; the skill arm starts from the solo table, so any difference
    # between arms comes from the documented skill-effect knobs alone.
    cutedsl_solo: TierProbs = Field(default_factory=lambda: TierProbs(fail=0.55, pass_=0.30, pass2x=0.15),
                                    description="CuTe DSL, solo arm")
    cutedsl_skill: TierProbs = Field(default_factory=lambda: TierProbs(fail=0.55, pass_=0.30, pass2x=0.15),
                                     description="CuTe DSL, skill arm (before the skill effect)")
    tirx_solo: TierProbs = Field(default_factory=lambda: TierProbs(fail=0.65, pass_=0.25, pass2x=0.10),
                                 description="TIRx, solo arm")
    tirx_skill: TierProbs = Field(default_factory=lambda: TierProbs(fail=0.65, pass_=0.25, pass2x=0.10),
                                  description="TIRx, skill arm (before the skill effect)")

    def get(self, dsl: str, arm: str) -> TierProbs:
        """The table entry for `dsl` ('cutedsl' | 'tirx') and `arm` ('solo' | 'skill')."""
        return getattr(self, f"{dsl}_{arm}")


class EvolutionRates(_Spec):
    """How a SKILL.md's claims change from hop k-1 to hop k.

    Convention: each parent claim takes exactly one transition, drawn with probabilities drop_rate, mutate_rate,
    strengthen_rate, weaken_rate, and copy_rate = 1 - their sum (so they must sum to <= 1). A strengthen drawn for
    an absolute claim, or a weaken drawn for a hedged one, cannot move it: the claim is copied unchanged (edge
    `copied`), so P(strengthened | parent not absolute) = strengthen_rate and P(weakened | parent not hedged) =
    weaken_rate. New claims are added on top (edge `new`).
    """

    drop_rate: float = Field(0.10, ge=0, le=1, description="probability a parent claim is left out (per claim per hop)")
    mutate_rate: float = Field(0.15, ge=0, le=1,
                               description="probability a parent claim is paraphrased: new wording, same category "
                                           "and modality (per claim per hop)")
    strengthen_rate: float = Field(0.08, ge=0, le=1,
                                   description="probability a parent claim moves one modality step stronger "
                                               "(hedged->plain->absolute; per claim per hop)")
    weaken_rate: float = Field(0.04, ge=0, le=1,
                               description="probability a parent claim moves one modality step weaker "
                                           "(absolute->plain->hedged; per claim per hop)")
    new_claims_per_hop: float = Field(1.5, ge=0, le=100,
                                      description="Poisson mean of claims added at each hop (claims per hop)")

    @model_validator(mode="after")
    def _transitions_fit(self) -> "EvolutionRates":
        total = self.drop_rate + self.mutate_rate + self.strengthen_rate + self.weaken_rate
        if total > 1.0 + _SUM_TOL:
            raise ValueError(f"drop_rate + mutate_rate + strengthen_rate + weaken_rate must be <= 1 (the rest is "
                             f"copy), got {total:.6g}")
        return self

    @property
    def copy_rate(self) -> float:
        """Probability a parent claim is drawn to be copied verbatim (the remainder of the transition rates)."""
        return max(0.0, 1.0 - self.drop_rate - self.mutate_rate - self.strengthen_rate - self.weaken_rate)


class CategoryWeights(_Spec):
    """Relative weights (>= 0, normalised on use) of the taxonomy categories for hop-0 and newly added claims."""

    # Assumptions: a bit of everything, closures and unsupported claims common enough to track along a chain.
    workload_census: float = Field(0.12, ge=0, description="relative weight (unitless)")
    hardware_mapping: float = Field(0.12, ge=0, description="relative weight (unitless)")
    performance_evidence: float = Field(0.10, ge=0, description="relative weight (unitless)")
    verified_reformulation: float = Field(0.08, ge=0, description="relative weight (unitless)")
    unverified_reformulation: float = Field(0.10, ge=0, description="relative weight (unitless)")
    bounded_failure_diagnosis: float = Field(0.10, ge=0, description="relative weight (unitless)")
    verification_recipe: float = Field(0.08, ge=0, description="relative weight (unitless)")
    unsupported_closure: float = Field(0.10, ge=0, description="relative weight (unitless)")
    unsupported_claim: float = Field(0.08, ge=0, description="relative weight (unitless)")
    dsl_specific_detail: float = Field(0.08, ge=0, description="relative weight (unitless)")
    open_question: float = Field(0.04, ge=0, description="relative weight (unitless)")

    @model_validator(mode="after")
    def _some_weight(self) -> "CategoryWeights":
        if sum(getattr(self, c) for c in CATEGORIES) <= 0:
            raise ValueError("at least one category weight must be > 0")
        return self

    def probabilities(self) -> dict[Category, float]:
        """The weights normalised to sum to 1, in CATEGORIES order."""
        total = sum(getattr(self, c) for c in CATEGORIES)
        return {c: getattr(self, c) / total for c in CATEGORIES}


class ModalityWeights(_Spec):
    """Relative weights (>= 0, normalised on use) of the modality of hop-0 and newly added claims."""

    hedged: float = Field(0.30, ge=0, description="relative weight (unitless)")
    plain: float = Field(0.50, ge=0, description="relative weight (unitless)")
    absolute: float = Field(0.20, ge=0, description="relative weight (unitless)")

    @model_validator(mode="after")
    def _some_weight(self) -> "ModalityWeights":
        if self.hedged + self.plain + self.absolute <= 0:
            raise ValueError("at least one modality weight must be > 0")
        return self

    def probabilities(self) -> dict[Modality, float]:
        total = self.hedged + self.plain + self.absolute
        return {m: getattr(self, m) / total for m in MODALITIES}


class SyntheticSpec(_Spec):
    """Synthetic mode of a campaign (`synthetic:` in an experiment YAML): the calibration of every draw.

    Durations are only recorded in the synthetic records, never slept. Lognormal quantities are given by their
    median and sigma (the standard deviation of the natural log).
    """

    seed: int = Field(0, description="root seed; each trial's draws are seeded from it and the trial id")
    judge: Literal["synthetic", "real"] = Field(
        "synthetic", description="synthetic: verdicts are drawn; real: the synthetic agent's final kernel is the "
                                 "problem's shipped solution, judged by real evaluator actors (exercises evaluators "
                                 "and their faults without a model; needs real problem ids)")

    # --- durations (recorded, never slept) ---
    attempt_wall_s_median: float = Field(900.0, gt=0, description="median wall time of an attempt's agent loop "
                                                                  "(seconds, lognormal; capped at the budget)")
    attempt_wall_s_sigma: float = Field(0.6, ge=0, description="sigma of log attempt wall time (unitless)")
    eval_s_median: float = Field(25.0, gt=0, description="median judge wall time per submission and for the final "
                                                         "judging (seconds, lognormal)")
    eval_s_sigma: float = Field(0.5, ge=0, description="sigma of log evaluation time (unitless)")
    wall_clock_budget_s: float = Field(2400.0, gt=0, description="attempt clock limit (seconds); a drawn wall time "
                                                                 "at or above it stops the attempt on wall_clock")

    # --- submissions and turns ---
    submissions_mean: float = Field(4.0, ge=1, description="mean counted submissions per attempt (submissions; "
                                                           "drawn as 1 + Poisson(mean - 1), capped at the budget)")
    submissions_budget: int = Field(10, ge=1, le=1000, description="counted submissions an attempt may make "
                                                                   "(submissions; reaching it stops on "
                                                                   "'submissions')")
    extra_turns_mean: float = Field(2.0, ge=0, description="Poisson mean of agent turns without a submission "
                                                           "(turns per attempt)")

    # --- tokens per LLM call ---
    first_prompt_tokens: int = Field(9000, ge=0, description="prompt of the first turn without a source skill "
                                                             "(tokens); a skill arm adds len(SKILL.md)/4")
    feedback_tokens_per_turn: int = Field(600, ge=0, description="tool/verdict feedback added to the conversation "
                                                                 "after each turn (tokens)")
    completion_tokens_median: float = Field(1800.0, gt=0, description="median completion per call (tokens, "
                                                                      "lognormal)")
    completion_tokens_sigma: float = Field(0.5, ge=0, description="sigma of log completion tokens (unitless)")
    cached_prompt_share: float = Field(0.9, ge=0, le=1, description="share of the previous call's prompt served "
                                                                    "from the prefix cache (probability)")

    # --- the judge ---
    tiers: TierTable = Field(default_factory=TierTable, description="final-tier probabilities per (dsl, arm)")
    compile_fail_share: float = Field(0.4, ge=0, le=1, description="share of failing kernels that do not compile; "
                                                                   "the rest compile but are wrong (probability)")
    eager_ms_median: float = Field(0.08, gt=0, description="median eager PyTorch time of a problem (milliseconds, "
                                                           "lognormal, drawn once per problem id)")
    eager_ms_sigma: float = Field(1.0, ge=0, description="sigma of log eager time across problems (unitless)")
    pass_speedup_min: float = Field(0.2, gt=0, lt=2, description="a pass tier's speedup is log-uniform in "
                                                                 "[pass_speedup_min, 2) (eager_ms / kernel_ms)")
    pass2x_speedup_sigma: float = Field(0.5, ge=0, description="a pass2x speedup is 2 * exp(|N(0, sigma)|) "
                                                               "(unitless)")

    # --- the skill effect on skill-arm tiers ---
    # delta = skill_help_shift + source_pass_shift * [source attempt passed] - closure_harm_per_share * u, clamped to
    # [-1, 1], where u is the share of unsupported_closure claims in the source SKILL.md. delta > 0 moves that
    # fraction of the fail probability to pass/pass2x (in their proportion); delta < 0 moves |delta| of the pass
    # probability to fail. `tier_probabilities()` (attempt.py) computes it, so analyses can recover the coupling.
    skill_help_shift: float = Field(0.05, ge=-1, le=1, description="baseline effect of having a source SKILL.md "
                                                                   "(fraction of the gap moved, see above)")
    source_pass_shift: float = Field(0.20, ge=-1, le=1, description="added when the source attempt passed, so "
                                                                    "relative standing couples to help/harm "
                                                                    "(fraction of the gap moved)")
    closure_harm_per_share: float = Field(0.60, ge=0, le=10,
                                          description="subtracted per unit share of unsupported_closure claims in "
                                                      "the source (fraction of the gap moved per share)")

    # --- SKILL.md claims ---
    initial_claims_mean: float = Field(8.0, ge=0, le=200, description="Poisson mean of claims in a fresh (hop-0 or "
                                                                      "solo) SKILL.md (claims; at least 1 drawn)")
    category_weights: CategoryWeights = Field(default_factory=CategoryWeights,
                                              description="categories of fresh and newly added claims")
    modality_weights: ModalityWeights = Field(default_factory=ModalityWeights,
                                              description="modalities of fresh and newly added claims")
    evolution: EvolutionRates = Field(default_factory=EvolutionRates,
                                      description="per-hop claim transitions of a skill attempt")

    # --- rare outcomes, for scale-testing the unhappy paths ---
    empty_skill_prob: float = Field(0.0, ge=0, le=1, description="probability an attempt writes an empty SKILL.md "
                                                                 "(its dependants are then skipped; probability)")
    llm_error_prob: float = Field(0.0, ge=0, le=1, description="probability an attempt ends with status error, "
                                                               "stop reason llm_error (probability)")
