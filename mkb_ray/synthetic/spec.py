"""What synthetic mode draws from: calibrated distributions replacing model servers and judges.

Every record produced under synthetic mode carries `synthetic: true` (AttemptRecord.synthetic, the store's trial
rows, exports and reports), so synthetic numbers can never pass for measured ones.

Calibration. The defaults below are ASSUMPTIONS, loosely shaped after what MetaKernelBench reports (pass rates
low-ish, pass2x rarer still, TIRx harder than CuTe DSL, a SKILL.md helping about as often as it harms, attempts of
a few submissions over tens of minutes). They are not measurements; a campaign that plans GPU-hours from them
should replace them with numbers from its own pilot run.

The claim categories come from a taxonomy file (`SyntheticSpec.taxonomy`, read by
`mkb_ray.claims.taxonomy.load_taxonomy`); the modalities and layouts are fixed here. The wordings of synthetic claims
are in `wordings.py`, and a category can be given weight only if it has wordings there.
"""
from __future__ import annotations

import functools
from typing import Any, Literal, NamedTuple, Optional

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, RootModel, model_validator

from ..claims.taxonomy import DEFAULT_TAXONOMY, Taxonomy, load_taxonomy
from .wordings import WORDINGS

# A taxonomy category name (names come from the taxonomy file, so not a Literal).
Category = str
# Ordered weakest to strongest: strengthening moves one step right, weakening one step left.
Modality = Literal["hedged", "plain", "absolute"]
MODALITIES: tuple[Modality, ...] = ("hedged", "plain", "absolute")
TierName = Literal["fail", "pass", "pass2x"]
Layout = Literal["bullets", "numbered", "prose", "sections", "mixed", "table"]
LAYOUTS: tuple[Layout, ...] = ("bullets", "numbered", "prose", "sections", "mixed", "table")
Phrasings = Literal["plain", "styled"]

# Default relative weights of the mkb-11 categories. Assumptions: a bit of everything, closures and unsupported
# claims common enough to track along a chain. A category of another taxonomy that is not listed here defaults to
# OTHER_CATEGORY_WEIGHT, and so needs wordings (or an explicit weight of 0).
DEFAULT_CATEGORY_WEIGHTS: dict[str, float] = {
    "workload_census": 0.12, "hardware_mapping": 0.12, "performance_evidence": 0.10, "verified_reformulation": 0.08,
    "unverified_reformulation": 0.10, "bounded_failure_diagnosis": 0.10, "verification_recipe": 0.08,
    "unsupported_closure": 0.10, "unsupported_claim": 0.08, "dsl_specific_detail": 0.08, "open_question": 0.04}
OTHER_CATEGORY_WEIGHT = 0.10
# The GPU judge's measured 'faster' margin (analysis/noise_margins.json, the widest class on target gpu), which the
# synthetic judge's reading noise reproduces; synthetic must not import the analysis, so it is copied here and
# tests/test_noise_margins.py fails when the two differ (re-measuring the judge means changing both).
JUDGE_NOISE_MARGIN = 0.035


@functools.lru_cache(maxsize=16)
def spec_taxonomy(name: str) -> Taxonomy:
    """The taxonomy a spec names, read once per process (specs are validated per worker and in tests, often)."""
    return load_taxonomy(name)


def __getattr__(name: str) -> Any:
    # CATEGORIES: the default taxonomy's names, for callers of the old constant; read lazily, not at import.
    if name == "CATEGORIES":
        return spec_taxonomy(DEFAULT_TAXONOMY).names
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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

    Convention. Merges are decided first: the parent claims are matched into *mergeable pairs* (the two parts of one
    compound idea of wordings.py, agreeing on the slot values they share, each claim in at most one pair, matched in
    document order; a pair whose compound already stands in the skill with those values is not mergeable) and each
    pair merges with probability merge_rate into one claim (edge `merged`, both parents listed). Every parent not
    merged then takes exactly one transition, drawn with probabilities drop_rate, mutate_rate, strengthen_rate,
    weaken_rate, split_rate and copy_rate = 1 - their sum (so they must sum to <= 1). A transition that cannot apply
    copies the claim unchanged (edge `copied`): a strengthen drawn for an absolute claim, a weaken for a hedged one,
    a split for a claim that is not a compound. So P(merged | parent in a mergeable pair) = merge_rate and, for a
    parent not merged, P(dropped) = drop_rate, P(paraphrased) = mutate_rate, P(strengthened | not absolute) =
    strengthen_rate, P(weakened | not hedged) = weaken_rate, P(split | compound) = split_rate (into its two parts,
    each edge `split`, same modality). A merged claim takes the weaker modality of its two parents. New claims are
    added on top (edge `new`), at random places; a surviving claim moves to a random place with reorder_prob.
    """

    drop_rate: float = Field(0.10, ge=0, le=1, description="probability a parent claim is left out (per claim per hop)")
    mutate_rate: float = Field(0.15, ge=0, le=1,
                               description="probability a parent claim is paraphrased: another phrasing of the same "
                                           "idea, same modality and slot values (per claim per hop)")
    strengthen_rate: float = Field(0.08, ge=0, le=1,
                                   description="probability a parent claim moves one modality step stronger "
                                               "(hedged->plain->absolute; per claim per hop)")
    weaken_rate: float = Field(0.04, ge=0, le=1,
                               description="probability a parent claim moves one modality step weaker "
                                           "(absolute->plain->hedged; per claim per hop)")
    split_rate: float = Field(0.02, ge=0, le=1,
                              description="probability a compound parent claim splits into its two parts (per "
                                          "compound claim per hop)")
    merge_rate: float = Field(0.02, ge=0, le=1,
                              description="probability a mergeable pair of parent claims merges into their compound "
                                          "(per pair per hop)")
    new_claims_per_hop: float = Field(1.5, ge=0, le=100,
                                      description="Poisson mean of claims added at each hop (claims per hop)")
    reorder_prob: float = Field(0.3, ge=0, le=1,
                                description="probability a surviving claim moves to a random place in the list, so "
                                            "claims do not keep their parent's order (per claim per hop)")

    @model_validator(mode="after")
    def _transitions_fit(self) -> "EvolutionRates":
        total = self.drop_rate + self.mutate_rate + self.strengthen_rate + self.weaken_rate + self.split_rate
        if total > 1.0 + _SUM_TOL:
            raise ValueError(f"drop_rate + mutate_rate + strengthen_rate + weaken_rate + split_rate must be <= 1 "
                             f"(the rest is copy), got {total:.6g}")
        return self

    @property
    def copy_rate(self) -> float:
        """Probability a parent claim is drawn to be copied verbatim (the remainder of the transition rates)."""
        return max(0.0, 1.0 - self.drop_rate - self.mutate_rate - self.strengthen_rate - self.weaken_rate
                   - self.split_rate)


class TierOverrides(_Spec):
    """A model's own entries of the tier table (`ModelEffect.tiers`); an entry left out keeps the spec's `tiers`."""

    cutedsl_solo: Optional[TierProbs] = Field(None, description="CuTe DSL, solo arm")
    cutedsl_skill: Optional[TierProbs] = Field(None, description="CuTe DSL, skill arm (before the skill effect)")
    tirx_solo: Optional[TierProbs] = Field(None, description="TIRx, solo arm")
    tirx_skill: Optional[TierProbs] = Field(None, description="TIRx, skill arm (before the skill effect)")


class ModelEffect(_Spec):
    """One model's overrides of the tier table and the skill effect (`SyntheticSpec.per_model`); a field left out
    (None) keeps the spec's own value. Units and meaning as the SyntheticSpec fields of the same names."""

    tiers: Optional[TierOverrides] = Field(None, description="this model's tier-table entries")
    skill_help_shift: Optional[float] = Field(None, ge=-1, le=1, description="fraction of the gap moved")
    source_pass_shift: Optional[float] = Field(None, ge=-1, le=1, description="fraction of the gap moved")
    closure_harm_per_share: Optional[float] = Field(None, ge=0, le=10,
                                                    description="fraction of the gap moved per share")
    closure_harm_per_claim: Optional[float] = Field(None, ge=0, le=1,
                                                    description="fraction of the gap moved per inherited closure "
                                                                "claim")


class PerModel(RootModel[dict[str, ModelEffect]]):
    """`SyntheticSpec.per_model`: a mapping `{model name: ModelEffect}`; models not named take the spec's values."""

    model_config = ConfigDict(frozen=True)

    def __hash__(self) -> int:
        return hash(tuple(self.root.items()))

    def get(self, model: Optional[str]) -> Optional[ModelEffect]:
        return self.root.get(model) if model is not None else None


class SkillEffect(NamedTuple):
    """The tier table and skill-effect knobs one model's attempts are drawn with (`SyntheticSpec.effect`)."""

    solo: dict[str, TierProbs]           # dsl -> solo-arm tier probabilities
    skill: dict[str, TierProbs]          # dsl -> skill-arm tier probabilities before the skill effect
    skill_help_shift: float
    source_pass_shift: float
    closure_harm_per_share: float
    closure_harm_per_claim: float

    def tiers(self, dsl: str, arm: str) -> TierProbs:
        return (self.skill if arm == "skill" else self.solo)[dsl]


class CategoryWeights(RootModel[dict[str, NonNegativeFloat]]):
    """Relative weights (>= 0, normalised on use) of the taxonomy categories for hop-0 and newly added claims.

    In a YAML a mapping `{category: weight}` that overrides only the categories it names; SyntheticSpec fills in the
    rest (DEFAULT_CATEGORY_WEIGHTS) for its taxonomy and rejects names the taxonomy does not have, so a validated
    spec holds every category of its taxonomy, in the taxonomy's order.
    """

    model_config = ConfigDict(frozen=True)

    def __hash__(self) -> int:
        return hash(tuple(self.root.items()))

    def __getitem__(self, name: str) -> float:
        return self.root[name]

    def probabilities(self) -> dict[Category, float]:
        """The weights normalised to sum to 1, in the mapping's (the taxonomy's) order."""
        total = sum(self.root.values())
        return {c: w / total for c, w in self.root.items()}


class SkillLayout(_Spec):
    """How a SKILL.md is laid out: one layout drawn per file with these relative weights (>= 0, normalised on use),
    and a few sentences that are not claims. bullets: one claim per `- ` item; numbered: `1. ` items; prose:
    paragraphs of 2-4 claims joined as sentences; sections: `## ` headings by category group, each section bullets or
    prose; mixed: two or three consecutive stretches in different styles; table: one claim per row of a two-column
    table (topic, note).

    The defaults give the plain text the generator has always written. Text that is hard the way real SKILL.md
    files are (issue 26) turns on the rest: `phrasings: styled` (five phrasings per idea instead of two: advice,
    terse notes, light rewordings; wordings_styled.py), claims behind narrative lead-ins (`lead_in_share`), two
    claims joined into one sentence (`compound_share`), the table layout and the styled boilerplate.
    `STYLED_TEXT` below is that setting as used by benchmarks/lineage_fidelity.py."""

    bullets: float = Field(0.2, ge=0, description="relative weight (unitless)")
    numbered: float = Field(0.15, ge=0, description="relative weight (unitless)")
    prose: float = Field(0.25, ge=0, description="relative weight (unitless)")
    sections: float = Field(0.25, ge=0, description="relative weight (unitless)")
    mixed: float = Field(0.15, ge=0, description="relative weight (unitless)")
    table: float = Field(0.0, ge=0, description="relative weight (unitless)")
    boilerplate_mean: float = Field(2.0, ge=0, le=12, description="Poisson mean of non-claim sentences per SKILL.md "
                                                                  "(sentences; at most the written ones)")
    phrasings: Phrasings = Field("plain", description="plain: an idea's two phrasings of wordings.py; styled: "
                                                      "also the three of wordings_styled.py, and its boilerplate")
    lead_in_share: float = Field(0.0, ge=0, le=1, description="probability that a claim in running text follows a "
                                                              "narrative lead-in ('Profiling showed that ...')")
    compound_share: float = Field(0.0, ge=0, le=1, description="probability that a claim in running text or a list "
                                                               "is joined to the next one in one sentence")

    @model_validator(mode="after")
    def _some_weight(self) -> "SkillLayout":
        if sum(getattr(self, name) for name in LAYOUTS) <= 0:
            raise ValueError("at least one layout weight must be > 0")
        return self

    def probabilities(self) -> dict[Layout, float]:
        total = sum(getattr(self, name) for name in LAYOUTS)
        return {name: getattr(self, name) / total for name in LAYOUTS}


# Synthetic text that is hard the way real skills are (issue 26, step 2): every layout, five phrasings per idea,
# narrative lead-ins and joined claims, more boilerplate. Lexical overlap of its paraphrases vs the hand-labelled
# chains': benchmarks/lineage_fidelity.py --overlap.
STYLED_TEXT = SkillLayout(bullets=0.15, numbered=0.1, prose=0.25, sections=0.2, mixed=0.15, table=0.15,
                          boilerplate_mean=3.0, phrasings="styled", lead_in_share=0.2, compound_share=0.15)


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
    judge_preset: Optional[Literal["production", "smoke"]] = Field(
        None, description="with judge: real, the shapes the final kernel is judged at: production (the "
                          "problem's) or smoke (small); default: the device's (production on a GPU, smoke on "
                          "the CPU target)")

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
    # A passing kernel's speedup (eager_ms / kernel_ms) as the synthetic judge reads it (synthetic/speed.py): the
    # problem's speed for the tier (drawn once per problem and tier, shared by every model, DSL and arm) times the
    # attempt's own spread times the judge's reading noise, kept inside the tier's band.
    pass_speedup_min: float = Field(0.2, gt=0, lt=2, description="a problem's pass speed is log-uniform in "
                                                                 "[pass_speedup_min, 2) (eager_ms / kernel_ms)")
    pass2x_speedup_sigma: float = Field(0.5, ge=0, description="a problem's pass2x speed is 2 * exp(|N(0, sigma)|) "
                                                               "(unitless)")
    attempt_speed_sigma: float = Field(0.3, ge=0, le=5, description="sd of the log of an attempt's kernel speed "
                                                                    "around its problem's speed for the tier "
                                                                    "(unitless)")
    judge_noise_margin: float = Field(JUDGE_NOISE_MARGIN, ge=0, le=5,
                                      description="the synthetic judge reads kernel times with log-normal noise "
                                                  "whose pair-p95 is this: two readings of one kernel differ by "
                                                  "more in 5 % of pairs (ratio - 1; default: the GPU judge's "
                                                  "measured margin, analysis/noise_margins.json)")

    # --- the skill effect on skill-arm tiers ---
    # delta = skill_help_shift + source_pass_shift * [source attempt passed] - closure_harm_per_share * u
    #         - closure_harm_per_claim * k, clamped to [-1, 1], where u is the share of the source SKILL.md's claims
    # in the taxonomy's closure_category (unsupported_closure in mkb-11) and k their number: the closures the skill
    # attempt inherits. delta > 0 moves that fraction of the fail probability to pass/pass2x (in their proportion);
    # delta < 0 moves |delta| of the pass probability to fail. `tier_probabilities()` (outcome_draw.py) computes it, so
    # analyses can recover the coupling (`planted.py` derives the paired rates it implies). `per_model` overrides
    # these knobs and the tier table for named models.
    skill_help_shift: float = Field(0.05, ge=-1, le=1, description="baseline effect of having a source SKILL.md "
                                                                   "(fraction of the gap moved, see above)")
    source_pass_shift: float = Field(0.20, ge=-1, le=1, description="added when the source attempt passed, so "
                                                                    "relative standing couples to help/harm "
                                                                    "(fraction of the gap moved)")
    closure_harm_per_share: float = Field(0.60, ge=0, le=10,
                                          description="subtracted per unit share of closure claims in the "
                                                      "source (fraction of the gap moved per share)")
    # The two knobs below are left out of a dump while at their defaults (exclude_if), so the config hash of every
    # campaign written before they existed is unchanged and its stored trials are not taken for stale.
    closure_harm_per_claim: float = Field(0.0, ge=0, le=1, exclude_if=lambda v: v == 0.0,
                                          description="subtracted per closure claim in the source SKILL.md, so harm "
                                                      "grows with each inherited closure (fraction of the gap moved "
                                                      "per claim; 0: off)")
    per_model: PerModel = Field(default_factory=lambda: PerModel({}), exclude_if=lambda v: not v.root,
                                description="per-model tier tables and skill-effect knobs (a mapping {model: "
                                            "ModelEffect}; fields not given keep the values above)")

    # --- per-problem difficulty and model x problem effects (issue 27) ---
    # e = d_p + u_mp, d_p ~ N(0, problem_difficulty_sigma) drawn once per problem id (shared by every model, DSL and
    # arm), u_mp ~ N(0, model_problem_sigma) once per (model, problem); e shifts every tier-table entry of that
    # (model, problem) on the ordinal logit scale before the skill effect: logit P(tier >= pass) and
    # logit P(tier >= pass2x) both move by +e (positive: easier; `attempt.shift_tiers`). Without them every problem
    # is equally hard and attempts of one cell are independent, which real benchmarks are not. Left out of a dump
    # at 0 (exclude_if) for the same reason as closure_harm_per_claim.
    problem_difficulty_sigma: float = Field(0.0, ge=0, le=5, exclude_if=lambda v: v == 0.0,
                                            description="sd of a problem's difficulty shift, shared by every model, "
                                                        "DSL and arm (logits; 0: off)")
    model_problem_sigma: float = Field(0.0, ge=0, le=5, exclude_if=lambda v: v == 0.0,
                                       description="sd of a (model, problem) pair's own shift, on top of the "
                                                   "problem's (logits; 0: off)")

    # --- SKILL.md claims ---
    initial_claims_mean: float = Field(8.0, ge=0, le=200, description="Poisson mean of claims in a fresh (hop-0 or "
                                                                      "solo) SKILL.md (claims; at least 1 drawn)")
    taxonomy: str = Field(DEFAULT_TAXONOMY, description="the claim taxonomy by name "
                                                        "(experiments/taxonomies/<name>.yaml) or path")
    category_weights: CategoryWeights = Field(default_factory=lambda: CategoryWeights(dict(DEFAULT_CATEGORY_WEIGHTS)),
                                              description="categories of fresh and newly added claims (a mapping; "
                                                          "names not given keep their defaults)")
    modality_weights: ModalityWeights = Field(default_factory=ModalityWeights,
                                              description="modalities of fresh and newly added claims")
    evolution: EvolutionRates = Field(default_factory=EvolutionRates,
                                      description="per-hop claim transitions of a skill attempt")
    layout: SkillLayout = Field(default_factory=SkillLayout, description="how each SKILL.md is laid out")

    # --- rare outcomes, for scale-testing the unhappy paths ---
    empty_skill_prob: float = Field(0.0, ge=0, le=1, description="probability an attempt writes an empty SKILL.md "
                                                                 "(its dependants are then skipped; probability)")
    llm_error_prob: float = Field(0.0, ge=0, le=1, description="probability an attempt ends with status error, "
                                                               "stop reason llm_error (probability)")

    def effect(self, model: Optional[str] = None) -> SkillEffect:
        """The tier table and skill-effect knobs of `model`'s attempts: `per_model[model]` over the spec's own."""
        own = self.per_model.get(model)
        tiers = own.tiers if own is not None else None

        def entry(dsl: str, arm: str) -> TierProbs:
            given = getattr(tiers, f"{dsl}_{arm}") if tiers is not None else None
            return given if given is not None else self.tiers.get(dsl, arm)

        def knob(name: str) -> float:
            given = getattr(own, name) if own is not None else None
            return given if given is not None else getattr(self, name)

        dsls = ("cutedsl", "tirx")
        return SkillEffect({d: entry(d, "solo") for d in dsls}, {d: entry(d, "skill") for d in dsls},
                           knob("skill_help_shift"), knob("source_pass_shift"), knob("closure_harm_per_share"),
                           knob("closure_harm_per_claim"))

    @model_validator(mode="before")
    @classmethod
    def _fill_category_weights(cls, data: Any) -> Any:
        """Every category of the taxonomy gets a weight: the given ones, defaults for the rest; unknown names fail."""
        if not isinstance(data, dict):
            return data
        name = data.get("taxonomy", DEFAULT_TAXONOMY)
        if not isinstance(name, str):
            return data  # the field's own validation reports it
        try:
            names = spec_taxonomy(name).names
        except ValueError as error:
            raise ValueError(f"taxonomy: {error}") from error
        given = data.get("category_weights")
        if isinstance(given, CategoryWeights):
            given = given.root
        if given is None:
            given = {}
        if not isinstance(given, dict):
            return data
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise ValueError(f"category_weights: {', '.join(map(repr, unknown))} not in taxonomy {name!r} "
                             f"(its categories: {', '.join(names)})")
        filled = {c: given.get(c, DEFAULT_CATEGORY_WEIGHTS.get(c, OTHER_CATEGORY_WEIGHT)) for c in names}
        return {**data, "category_weights": filled}

    @model_validator(mode="after")
    def _weights_have_wordings(self) -> "SyntheticSpec":
        weights = self.category_weights.root
        if sum(weights.values()) <= 0:
            raise ValueError("category_weights: at least one category weight must be > 0")
        missing = [c for c, w in weights.items() if w > 0 and c not in WORDINGS]
        if missing:
            raise ValueError(f"category_weights: {', '.join(map(repr, missing))} of taxonomy {self.taxonomy!r} "
                             f"have weight > 0 but no wordings in mkb_ray/synthetic/wordings.py; give them weight "
                             f"0 or add wordings")
        return self
