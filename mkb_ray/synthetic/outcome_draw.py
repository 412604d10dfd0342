"""One synthetic attempt: a `TrialOutcome` drawn from a `SyntheticSpec` instead of run against a model and a GPU.

`synthetic_outcome(trial, source_skill, spec)` is deterministic per (spec.seed, trial.trial_id): the same trial
always gets the same record, whichever worker draws it and in whatever order. It returns what a real attempt hands
the store — a valid AttemptRecord as JSON (synthetic=True; verdict reasons 'synthetic draw', timing method
'synthetic'), the SKILL.md and a placeholder final kernel — in a fraction of a millisecond, so the scheduler and
store can be scale-tested without GPUs or models. Durations and tokens are only recorded, never slept or spent.

Draws come from two independent streams seeded from a stable hash (blake2b, not Python's hash()) of the seed and
the trial id: "attempt" (tier first, then submissions, durations, tokens) and "skill" (the SKILL.md claims). The
final tier is the first draw of its stream, so knobs other than the tier probabilities and the skill effect never
move a trial's tier (common random numbers across spec variants).

The record is built as a plain dict from templates that pydantic itself dumped once (every field present), then
validated and serialised in one AttemptRecord.model_validate(...).model_dump_json() call over the whole dict:
pydantic-core does that in ~75 us for a 5-submission record, about what json.dumps alone costs, so every synthetic
record is checked against the schema for free. Measured 2026-11-29 on the 2-core dev machine: ~210-235 us of CPU
per outcome in all, a third of it that validation and dump. Re-measured 2026-12-01 (shared, busier machine) after
SKILL.md layouts, reordering and merges/splits came in: ~450 us per outcome against ~360 us for the previous
generator in the same conditions; of that, parse + evolve + render of a 30-claim SKILL.md is ~0.3 ms.
"""
from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import math
import random
from typing import Any, Optional

from ..records import Trial, TrialOutcome
from ..records import AttemptConfig, AttemptRecord, LLMCallRecord, SubmissionRecord
from ..records import Verdict
from ..records.intervention import is_intervention_arm
from .claims import ClaimContext, evolve, fresh_claims, poisson
from .seeding import stable_int
from .skill_md import parse_skill, render_skill, skill_source_tier
from .spec import SyntheticSpec, TierProbs, spec_taxonomy
from .speed import judged_speedup

# Synthetic clock: every synthetic attempt starts here (a fixed instant keeps outcomes reproducible; the store keeps
# its own real times). Offsets within the attempt are the drawn durations.
SYNTHETIC_EPOCH = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc)
SYNTHETIC_REASON = "synthetic draw"
_TIER_RANK = {"fail": 0, "pass": 1, "pass2x": 2}
_TIERS = ("fail", "pass", "pass2x")
_CHARS_PER_TOKEN = 4


def _logit_shift(q: float, e: float) -> float:
    """sigmoid(logit(q) + e), written so that neither branch overflows; q of 0 or 1 stays put (no NaN), and a sum
    of table entries a rounding error past 1 counts as 1."""
    if q <= 0.0:
        return 0.0
    if q >= 1.0:
        return 1.0
    if e >= 0.0:
        return q / (q + (1.0 - q) * math.exp(-e))
    grown = q * math.exp(e)
    return grown / ((1.0 - q) + grown)


def shift_tiers(probs: TierProbs, e: float) -> TierProbs:
    """`probs` made easier by `e` on the ordinal logit scale: logit P(tier >= pass) and logit P(tier >= pass2x) both
    move by +e (e < 0: harder). One number moves both thresholds, so the tiers stay ordered and a problem that is
    hard for passing is hard for pass2x too (SyntheticSpec.problem_difficulty_sigma). e == 0 returns `probs` itself,
    so specs without problem effects draw bit for bit as before."""
    if e == 0.0:
        return probs
    at_least_pass = _logit_shift(probs.pass_ + probs.pass2x, e)
    pass2x = min(_logit_shift(probs.pass2x, e), at_least_pass)
    return TierProbs.model_construct(fail=1.0 - at_least_pass, pass_=at_least_pass - pass2x, pass2x=pass2x)


@functools.lru_cache(maxsize=65536)
def problem_effect(spec_seed: int, model: Optional[str], problem_id: str, problem_sigma: float,
                   model_problem_sigma: float) -> float:
    """The logit shift e = d_p + u_mp of `model`'s attempts at `problem_id` (SyntheticSpec.problem_difficulty_sigma):
    d_p seeded by (seed, problem) alone, so every model shares a problem's difficulty; u_mp by (seed, model,
    problem). Deterministic and the same on every machine; exactly 0.0 with both sigmas 0."""
    e = 0.0
    if problem_sigma > 0:
        e += random.Random(stable_int("mkb-synthetic-difficulty", spec_seed, problem_id)).gauss(0.0, problem_sigma)
    if model_problem_sigma > 0:
        rng = random.Random(stable_int("mkb-synthetic-model-problem", spec_seed, model, problem_id))
        e += rng.gauss(0.0, model_problem_sigma)
    return e


def tier_probabilities(spec: SyntheticSpec, dsl: str, arm: str, *, closure_share: float = 0.0,
                       source_passed: bool = False, closure_claims: int = 0,
                       model: Optional[str] = None, problem_effect: float = 0.0) -> TierProbs:
    """The final-tier probabilities of an attempt: the spec's table entry, shifted by `problem_effect` (the logit
    shift of the attempt's model and problem, `shift_tiers`), and for the skill arm then the skill effect

        delta = skill_help_shift + source_pass_shift * source_passed - closure_harm_per_share * closure_share
                - closure_harm_per_claim * closure_claims

    clamped to [-1, 1]: delta > 0 moves that fraction of P(fail) to pass/pass2x (in their proportion); delta < 0
    moves |delta| of P(pass) + P(pass2x) to fail. `closure_share` and `closure_claims` are the share and the number
    of the source SKILL.md's claims in the taxonomy's closure_category (unsupported_closure in mkb-11);
    `source_passed` whether the source attempt's final tier was pass or pass2x. `model`: the knobs and table of
    `spec.per_model[model]` where it names them (SyntheticSpec.effect)."""
    effect = spec.effect(model)
    base = shift_tiers(effect.tiers(dsl, arm), problem_effect)
    if arm != "skill":
        return base
    delta = effect.skill_help_shift + (effect.source_pass_shift if source_passed else 0.0) \
        - effect.closure_harm_per_share * closure_share - effect.closure_harm_per_claim * closure_claims
    delta = max(-1.0, min(1.0, delta))
    fail, pas, pas2 = base.fail, base.pass_, base.pass2x
    if delta >= 0:
        moved = fail * delta
        passing = pas + pas2
        share = pas / passing if passing > 0 else 1.0
        fail, pas, pas2 = fail - moved, pas + moved * share, pas2 + moved * (1.0 - share)
    else:
        keep = 1.0 + delta
        fail, pas, pas2 = fail + (pas + pas2) * -delta, pas * keep, pas2 * keep
    return TierProbs.model_construct(fail=fail, pass_=pas, pass2x=pas2)


def _draw_tier(rng: random.Random, probs: TierProbs) -> str:
    r = rng.random()
    return "fail" if r < probs.fail else "pass" if r < probs.fail + probs.pass_ else "pass2x"


def _lognormal(rng: random.Random, median: float, sigma: float) -> float:
    return median * math.exp(sigma * rng.gauss(0.0, 1.0)) if sigma > 0 else median


@functools.lru_cache(maxsize=8192)
def _eager_ms(seed: int, problem_id: str, median: float, sigma: float) -> float:
    """A problem's eager time: one draw per (seed, problem), shared by all its attempts."""
    rng = random.Random(stable_int("mkb-synthetic-eager", seed, problem_id))
    return round(_lognormal(rng, median, sigma), 6)


def _iso(offset_s: float) -> str:
    """SYNTHETIC_EPOCH + offset_s (rounded to the millisecond) as datetime.isoformat(timespec="milliseconds")
    writes it; formatted by hand within the first day (datetime arithmetic is a measurable share of an outcome)."""
    total_ms = int(round(offset_s * 1000.0))
    hours, ms = divmod(total_ms, 3_600_000)
    if 0 <= hours < 24:
        minutes, ms = divmod(ms, 60_000)
        seconds, ms = divmod(ms, 1000)
        return f"2026-01-01T{hours:02d}:{minutes:02d}:{seconds:02d}.{ms:03d}+00:00"
    return (SYNTHETIC_EPOCH + _dt.timedelta(milliseconds=total_ms)).isoformat(timespec="milliseconds")


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _placeholder_kernel(trial_id: str, index: int) -> str:
    return ("# SYNTHETIC placeholder: no kernel was written. mkb-ray synthetic mode drew this attempt's outcome at\n"
            f"# random (trial {trial_id}, submission {index}); no model or GPU was used.\n")


# --- JSON templates: pydantic's own dump of each record type, so a built record has every field in order ---------

@functools.lru_cache(maxsize=1)
def _templates() -> dict[str, dict[str, Any]]:
    verdict = Verdict(problem_id="p", source_hash="h", dsl="tirx", device="cuda", preset="production", seed=0,
                      compiled=False, executed=False, tier="fail", reason=SYNTHETIC_REASON)
    call = LLMCallRecord(index=0, turn=1, started_at="t", attempt_clock_s=0.0, ok=True)
    sub = SubmissionRecord(index=1, counted=True, submitted_at="t", attempt_clock_s=0.0)
    config = AttemptConfig(problem_id="p", dsl="tirx", model="m", out_dir=".")
    record = AttemptRecord(config=config, status="completed", stop_reason="finished", template_hash="",
                           model="m", started_at="t", finished_at="t")
    out = {"verdict": verdict.model_dump(mode="json"), "call": call.model_dump(mode="json"),
           "sub": sub.model_dump(mode="json"), "config": config.model_dump(mode="json"),
           "record": record.model_dump(mode="json")}
    out["usage"] = out["call"].pop("usage")
    return out


def _config(trial: Trial, spec: SyntheticSpec, t: dict[str, dict[str, Any]]) -> dict[str, Any]:
    config = dict(t["config"])
    budget = dict(config["budget"])
    budget["submissions"] = spec.submissions_budget
    budget["wall_clock_s"] = float(spec.wall_clock_budget_s)
    skill_path = None
    if trial.arm == "skill":
        skill_path = f"{trial.skill_from}/SKILL.md" if trial.skill_from else "source/SKILL.md"
    config.update(problem_id=trial.problem_id, dsl=trial.dsl, target=trial.target, model=trial.model,
                  arm=trial.arm, skill_path=skill_path, budget=budget, out_dir=".", attempt_id=trial.trial_id)
    return config


def _verdict(rng: random.Random, spec: SyntheticSpec, trial: Trial, tier: str, source_hash: str, seed: int,
             eval_s: float, eager_ms: float, template: dict[str, Any]) -> dict[str, Any]:
    v = dict(template)
    gpu = trial.target == "gpu"
    v.update(problem_id=trial.problem_id, problem_hash=trial.problem_hash or None, source_hash=source_hash,
             dsl=trial.dsl, device="cuda" if gpu else "cpu", seed=seed, target="sm_90a" if gpu else "llvm",
             tier=tier, reason=SYNTHETIC_REASON, timing_method="synthetic", device_name="synthetic",
             wall_s=eval_s, worker_s=eval_s)
    if tier == "fail":
        if rng.random() < spec.compile_fail_share:
            v.update(compiled=False, executed=False, correct=None, rejected_by="compile")
        else:
            v.update(compiled=True, executed=True, correct=False, rejected_by="correctness")
        return v
    speedup = judged_speedup(rng, spec, spec.seed, trial.problem_id, tier)  # type: ignore[arg-type]
    kernel_ms = round(eager_ms / speedup, 6)
    v.update(compiled=True, executed=True, correct=True, kernel_ms=kernel_ms, kernel_min_ms=kernel_ms,
             eager_ms=eager_ms, speedup=round(speedup, 4), dsl_outputs_only=True)
    return v


def synthetic_outcome(trial: Trial, source_skill: Optional[str], spec: SyntheticSpec) -> TrialOutcome:
    """The outcome of `trial` drawn from `spec` (see the module docstring). A skill trial whose source SKILL.md is
    empty or missing is `skipped` (as a real attempt is); otherwise `completed`, or `error` with probability
    spec.llm_error_prob. Skill trials evolve the source's claims; other trials write fresh claims."""
    t = _templates()
    key = stable_int("mkb-synthetic", spec.seed, trial.trial_id)
    config = _config(trial, spec, t)
    record = dict(t["record"])
    record.update(config=config, synthetic=True, problem_hash=trial.problem_hash or None,
                  template_hash=trial.template_hash, model=trial.model, started_at=_iso(0.0),
                  notes=[f"synthetic: drawn by mkb_ray.synthetic (seed {spec.seed}); no model or GPU was used"])

    source = (source_skill or "").strip()
    if trial.arm == "skill":
        record["skill_source_sha256"] = _sha256(source)
        if not source:
            record.update(status="skipped", stop_reason="empty_source_skill", skill_md_path="SKILL.md",
                          finished_at=_iso(0.0))
            return TrialOutcome(trial_id=trial.trial_id, status="skipped", record_json=_dumps(record),
                                artifacts={"SKILL.md": b""}, synthetic=True, skill_md="")

    rng = random.Random(key)
    # An intervention's hand-off may have cut claims out of the source (claim ablation, placebo trim, gate): those
    # claims are gone, not malformed.
    edited = is_intervention_arm(trial.arm_name)
    source_claims = parse_skill(source, strict=not edited) if trial.arm == "skill" else []
    closure = spec_taxonomy(spec.taxonomy).closure_category
    closure_claims = sum(c.category == closure for c in source_claims)
    closure_share = closure_claims / len(source_claims) if source_claims else 0.0
    source_passed = skill_source_tier(source) in ("pass", "pass2x") if trial.arm == "skill" else False
    shift = problem_effect(spec.seed, trial.model, trial.problem_id, spec.problem_difficulty_sigma,
                           spec.model_problem_sigma)
    probs = tier_probabilities(spec, trial.dsl, trial.arm, closure_share=closure_share,
                               source_passed=source_passed, closure_claims=closure_claims, model=trial.model,
                               problem_effect=shift)
    final_tier = _draw_tier(rng, probs)  # the stream's first draw: the same uniform number whatever the other knobs
    llm_error = rng.random() < spec.llm_error_prob
    empty_skill = rng.random() < spec.empty_skill_prob

    # Submissions and turns.
    n_subs = min(spec.submissions_budget, 1 + poisson(rng, spec.submissions_mean - 1.0))
    turns = n_subs + poisson(rng, spec.extra_turns_mean)
    sub_turns = sorted(rng.sample(range(1, turns + 1), n_subs))
    eval_s = [round(_lognormal(rng, spec.eval_s_median, spec.eval_s_sigma), 3) for _ in range(n_subs)]
    final_eval_s = round(_lognormal(rng, spec.eval_s_median, spec.eval_s_sigma), 3)
    wall_drawn = _lognormal(rng, spec.attempt_wall_s_median, spec.attempt_wall_s_sigma)
    out_of_time = wall_drawn >= spec.wall_clock_budget_s
    wall_drawn = min(wall_drawn, spec.wall_clock_budget_s)
    eval_total = sum(eval_s)
    # The LLM calls share what the judge leaves of the wall time (at least a tenth of it, in proportion to their
    # completion tokens); a draw that ran out of time ends at the budget.
    llm_total = max(wall_drawn - eval_total, 0.1 * wall_drawn)

    # LLM calls: turns 1..T, then the SKILL.md request; prompts grow with the conversation.
    n_calls = turns + 1
    completions = [max(1, int(_lognormal(rng, spec.completion_tokens_median, spec.completion_tokens_sigma)))
                   for _ in range(n_calls)]
    completion_total = sum(completions)
    prompt = spec.first_prompt_tokens + len(source) // _CHARS_PER_TOKEN
    eager_ms = _eager_ms(spec.seed, trial.problem_id, spec.eager_ms_median, spec.eager_ms_sigma)
    calls: list[dict[str, Any]] = []
    subs: list[dict[str, Any]] = []
    sub_tiers = [final_tier if i == n_subs - 1 else _cap(_draw_tier(rng, probs), final_tier)
                 for i in range(n_subs)]
    clock = 0.0
    prev_prompt = 0
    sub_index = 0
    tpl_call, tpl_usage, tpl_sub, tpl_verdict = t["call"], t["usage"], t["sub"], t["verdict"]
    reply_max = config["budget"]["reply_max_tokens"]
    verdict_seed = key & 0x7FFFFFFF
    for j, completion in enumerate(completions):
        latency = round(llm_total * completion / completion_total, 3)
        usage = dict(tpl_usage)
        usage.update(prompt_tokens=prompt, completion_tokens=completion,
                     cached_tokens=int(spec.cached_prompt_share * prev_prompt), latency_s=latency)
        call = dict(tpl_call)
        call.update(index=j, turn=j + 1, purpose="turn" if j < turns else "skill", started_at=_iso(clock),
                    attempt_clock_s=round(clock, 3), finish_reason="stop", reply_chars=completion * _CHARS_PER_TOKEN,
                    max_tokens=reply_max, usage=usage)
        calls.append(call)
        clock += latency
        prev_prompt = prompt
        prompt += completion + spec.feedback_tokens_per_turn
        while sub_index < n_subs and sub_turns[sub_index] == j + 1:
            index = sub_index + 1
            kernel = _placeholder_kernel(trial.trial_id, index)
            kernel_sha = _sha256(kernel)
            e = eval_s[sub_index]
            sub = dict(tpl_sub)
            sub.update(index=index, counted=True, kernel_sha256=kernel_sha, kernel_bytes=len(kernel),
                       verdict=_verdict(rng, spec, trial, sub_tiers[sub_index], kernel_sha, verdict_seed + index,
                                        e, eager_ms, tpl_verdict),
                       submitted_at=_iso(clock), attempt_clock_s=round(clock, 3), round_trip_s=e, eval_s=e)
            subs.append(sub)
            clock += e
            sub_index += 1
    wall_s = round(clock, 3)

    if llm_error:
        status, stop_reason, final_tier_out = "error", "llm_error", None
        last = calls[-1]
        last.update(ok=False, error="synthetic: the model endpoint kept failing (drawn)", finish_reason=None,
                    reply_chars=0)
        last["usage"] = dict(last["usage"], completion_tokens=0)
        record["error"] = last["error"]
    else:
        status, final_tier_out = "completed", final_tier
        stop_reason = ("wall_clock" if out_of_time else
                       "submissions" if n_subs >= spec.submissions_budget else "finished")

    # The SKILL.md this attempt writes.
    if llm_error or empty_skill:
        skill_md = ""
    else:
        srng = random.Random(key ^ 0x5EED_5C1A_11C1_A1B5)
        hop = f"h{trial.hop}" if trial.hop is not None else "a"
        context = ClaimContext(id_prefix=f"{hop}-{key & 0xFFFFFF:06x}", problem_id=trial.problem_id,
                               dsl=trial.dsl, target=trial.target)
        claims = (evolve(source_claims, spec, srng, context) if trial.arm == "skill"
                  else fresh_claims(spec, srng, context))
        skill_md = render_skill(claims, attempt=trial.trial_id, tier=final_tier_out, rng=srng, layout=spec.layout)
    skill_bytes = skill_md.encode()

    artifacts = {"SKILL.md": skill_bytes}
    if final_tier_out is not None:
        final_kernel = _placeholder_kernel(trial.trial_id, n_subs)
        final = dict(subs[-1]["verdict"], wall_s=final_eval_s, worker_s=final_eval_s)
        artifacts["final_kernel.py"] = final_kernel.encode()
        record.update(final_verdict=final, final_kernel_path="final_kernel.py", final_eval_s=final_eval_s)
    usages = [c["usage"] for c in calls]
    record.update(status=status, stop_reason=stop_reason, turns=turns, submissions=subs, llm_calls=calls,
                  skill_md_path="SKILL.md", skill_md_bytes=len(skill_bytes), wall_s=wall_s, attempt_clock_s=wall_s,
                  prompt_tokens=sum(u["prompt_tokens"] for u in usages),
                  completion_tokens=sum(u["completion_tokens"] for u in usages),
                  cached_tokens=sum(u["cached_tokens"] for u in usages), finished_at=_iso(wall_s + final_eval_s))
    return TrialOutcome(trial_id=trial.trial_id, status=status, record_json=_dumps(record), artifacts=artifacts,
                        synthetic=True, final_tier=final_tier_out, skill_md=skill_md,
                        error=record["error"], tokens=record["prompt_tokens"] + record["completion_tokens"])


def _cap(tier: str, final_tier: str) -> str:
    """An earlier submission's tier, never above the final one: the agent keeps improving or stays put."""
    return tier if _TIER_RANK[tier] <= _TIER_RANK[final_tier] else final_tier


def _dumps(record: dict[str, Any]) -> str:
    # One validation of the whole dict in pydantic-core (measured ~75 us for a 5-submission record, about what
    # json.dumps alone costs), so every synthetic record is checked against the schema, and written exactly as a
    # real record is.
    return AttemptRecord.model_validate(record).model_dump_json()
