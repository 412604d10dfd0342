"""Where a scheduled trial becomes an attempt: the body of the Ray task the scheduler dispatches for each trial.

It runs on any node of the cluster, so it takes everything by value (the trial, the source SKILL.md text, the
model endpoint, the evaluator actor handle) and returns a `TrialOutcome` carrying the record and every artifact as
bytes: the driver, the store's only writer, needs no shared filesystem. On a cluster run (`shared_run_dir` set) the
task instead writes its artifacts and its outcome into the run's shared directory before it returns (spool.py), so
that a finished attempt survives the driver and a large workspace never travels through it. Real trials run
`mkb_ray.agents.run_attempt` (the agent loop); synthetic trials draw their outcome from `mkb_ray.synthetic` —
optionally with the synthetic agent's final kernel (the problem's shipped solution) judged for real, to exercise
evaluators under faults.
"""
from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Union

from ..records import HandOff, Trial, TrialOutcome
from ..records.intervention import HAND_OFF_ARTIFACT

# What a trial reads: its source's SKILL.md (None for a solo), or an intervention's hand-off.
SkillInput = Optional[Union[str, HandOff]]

# Attempt files kept as artifacts (everything the attempt runner writes; see mkb_ray.agents.run_attempt).
_SKIP_SUFFIXES = (".tmp",)


@dataclass(frozen=True)
class TrialContext:
    """What every trial of a campaign shares: how its attempts are configured and where they reach services."""

    budget_json: str                    # BudgetSpec as JSON
    agent: str                          # workspace | chat (resolved per model by the scheduler)
    problems_root: Optional[str] = None
    synthetic_json: Optional[str] = None  # SyntheticSpec as JSON: synthetic mode
    real_judge: bool = False            # synthetic mode only: judge the synthetic agent's final kernel for real
    shared_run_dir: Optional[str] = None  # cluster runs: the run directory, at this path on every node (spool.py)


def collect_artifacts(out_dir: Path) -> dict[str, bytes]:
    """Every file an attempt wrote, keyed by its path relative to the attempt directory."""
    artifacts: dict[str, bytes] = {}
    for path in sorted(out_dir.rglob("*")):
        if path.is_file() and not path.name.endswith(_SKIP_SUFFIXES):
            artifacts[path.relative_to(out_dir).as_posix()] = path.read_bytes()
    return artifacts


def outcome_from_attempt(trial: Trial, out_dir: Path) -> TrialOutcome:
    """The outcome of a real attempt whose directory `out_dir` holds record.json and its files. The record JSON
    is the record.json file itself (validated), so the store keeps one copy of it, not a re-serialised twin."""
    from ..records import AttemptRecord

    artifacts = collect_artifacts(out_dir)
    record_json = artifacts["record.json"].decode("utf-8")
    record = AttemptRecord.model_validate_json(record_json)
    skill = artifacts.get("SKILL.md", b"").decode("utf-8", errors="replace")
    return TrialOutcome(trial_id=trial.trial_id, status=record.status, record_json=record_json,
                        artifacts=artifacts, synthetic=record.synthetic, error=record.error,
                        final_tier=record.final_verdict.tier if record.final_verdict else None, skill_md=skill,
                        tokens=record.prompt_tokens + record.completion_tokens)


def _budget_json(ctx: TrialContext, hand: Optional[HandOff]) -> str:
    """The campaign's budget, plus a budget-matched solo's extra time and tokens."""
    if hand is None or (not hand.extra_wall_s and not hand.extra_tokens):
        return ctx.budget_json
    from ..records import BudgetSpec

    budget = BudgetSpec.model_validate_json(ctx.budget_json)
    update: dict[str, Any] = {"wall_clock_s": budget.wall_clock_s + hand.extra_wall_s}
    if budget.tokens is not None:
        update["tokens"] = budget.tokens + hand.extra_tokens
    return budget.model_copy(update=update).model_dump_json()


def _with_hand_off(outcome: TrialOutcome, hand: HandOff) -> TrialOutcome:
    """The outcome with what an intervention handed the attempt: the text as an artifact (`hand_off.md`, so the
    report and the planted-effect check read exactly what the attempt read) and the note in its record's notes."""
    artifacts = dict(outcome.artifacts)
    if hand.text:
        artifacts[HAND_OFF_ARTIFACT] = hand.text.encode()
    if not hand.note or outcome.record_json is None:
        return replace(outcome, artifacts=artifacts)
    from ..records import AttemptRecord

    record = AttemptRecord.model_validate_json(outcome.record_json)
    record.notes.append(hand.note)
    record_json = record.model_dump_json(indent=2)
    if "record.json" in artifacts:
        artifacts["record.json"] = record_json.encode()
    return replace(outcome, record_json=record_json, artifacts=artifacts)


def identical_outcome(trial: Trial, hand: HandOff, ctx: TrialContext) -> TrialOutcome:
    """The stored outcome of an intervention trial whose hand-off is its control's exact text: not run, skipped."""
    import datetime

    from ..records import AttemptConfig, AttemptRecord, BudgetSpec

    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
    skill_path = Path("source_SKILL.md") if trial.arm == "skill" else None
    config = AttemptConfig(problem_id=trial.problem_id, dsl=trial.dsl, target=trial.target, model=trial.model,
                           agent=ctx.agent, arm=trial.arm, skill_path=skill_path,
                           budget=BudgetSpec.model_validate_json(ctx.budget_json), out_dir=Path("."),
                           attempt_id=trial.trial_id)
    record = AttemptRecord(config=config, status="skipped", stop_reason="identical_hand_off",
                           synthetic=ctx.synthetic_json is not None, problem_hash=trial.problem_hash or None,
                           template_hash=trial.template_hash, model=trial.model, started_at=now, finished_at=now,
                           skill_md_path="SKILL.md",
                           notes=[hand.note, f"not run: the hand-off is byte-identical to {hand.identical_to}'s"])
    return TrialOutcome(trial_id=trial.trial_id, status="skipped", record_json=record.model_dump_json(),
                        artifacts={"SKILL.md": b""}, synthetic=record.synthetic, skill_md="")


async def run_real_trial(trial: Trial, source_skill: SkillInput, ctx: TrialContext, spec: Any,
                         api_base: Optional[str], evaluator: Any) -> TrialOutcome:
    """One real attempt: the roster model `spec` (served at `api_base`, or its provider API) and the evaluator."""
    from ..agents.run_attempt import run_attempt
    from ..llm.client import LLMClient
    from ..records import AttemptConfig, BudgetSpec

    hand = source_skill if isinstance(source_skill, HandOff) else None
    text = hand.text if hand is not None else source_skill
    work = Path(tempfile.mkdtemp(prefix="mkb-trial-"))
    try:
        skill_path = None
        if trial.arm == "skill":
            skill_path = work / "source_SKILL.md"
            skill_path.write_text(text or "", encoding="utf-8")
        out_dir = work / "attempt"
        config = AttemptConfig(problem_id=trial.problem_id, dsl=trial.dsl, target=trial.target, model=trial.model,
                               agent=ctx.agent, arm=trial.arm, skill_path=skill_path,
                               budget=BudgetSpec.model_validate_json(_budget_json(ctx, hand)), seed=None,
                               out_dir=out_dir, attempt_id=trial.trial_id)
        client = LLMClient(spec, api_base if spec.is_local else None, session_id=trial.trial_id)
        root = Path(ctx.problems_root) if ctx.problems_root else None
        await run_attempt(config, client, evaluator, problems_root=root)
        outcome = outcome_from_attempt(trial, out_dir)
        return _with_hand_off(outcome, hand) if hand is not None else outcome
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def _judge_for_real(trial: Trial, outcome: TrialOutcome, ctx: TrialContext, evaluator: Any) -> TrialOutcome:
    """The synthetic agent's final kernel — the problem's shipped solution for the trial's variant — judged by
    the real evaluator; its verdict replaces the drawn one (the record stays labelled synthetic)."""
    from ..agents.evaluator_port import as_evaluator_port
    from ..problems import load_problems
    from ..records import AttemptRecord
    from ..records import Verdict

    problem = load_problems(Path(ctx.problems_root) if ctx.problems_root else None).get(trial.problem_id)
    variant = "tirx_cpu" if trial.target == "cpu" else trial.dsl
    solution = problem.solutions.get(variant)
    if solution is None:
        return outcome
    source = solution.read_text(encoding="utf-8")
    preset = _synthetic_spec(ctx.synthetic_json).judge_preset if ctx.synthetic_json else None
    verdict = Verdict.model_validate(await as_evaluator_port(evaluator).evaluate(trial.problem_id, source, trial.dsl,
                                                                                 preset=preset))
    record = AttemptRecord.model_validate_json(outcome.record_json or "")
    record.final_verdict = verdict
    record.notes.append("synthetic agent; final kernel = the problem's shipped solution, judged for real")
    artifacts = dict(outcome.artifacts)
    artifacts["final_kernel.py"] = source.encode()
    artifacts["final_verdict.json"] = verdict.model_dump_json(indent=2).encode()
    return replace(outcome, record_json=record.model_dump_json(), artifacts=artifacts, final_tier=verdict.tier)


def execute_trial(trial: Trial, source_skill: SkillInput, ctx: TrialContext, spec: Any = None,
                  api_base: Optional[str] = None, evaluator: Any = None) -> TrialOutcome:
    """The Ray task body (synchronous entry point): one trial, real or synthetic. Synthetic draws run without an
    event loop: they are the hot path of a 10^5-attempt campaign. An intervention trial whose hand-off is its
    control's exact text is not run (`identical_outcome`)."""
    if isinstance(source_skill, HandOff) and source_skill.identical_to is not None:
        return identical_outcome(trial, source_skill, ctx)
    if ctx.synthetic_json is None:
        return asyncio.run(run_real_trial(trial, source_skill, ctx, spec, api_base, evaluator))
    from ..synthetic import synthetic_outcome

    hand = source_skill if isinstance(source_skill, HandOff) else None
    outcome = synthetic_outcome(trial, hand.text if hand is not None else source_skill,
                                _synthetic_spec(ctx.synthetic_json))
    if hand is not None:
        outcome = _with_hand_off(outcome, hand)
    if ctx.real_judge and evaluator is not None and outcome.status == "completed":
        return asyncio.run(_judge_for_real(trial, outcome, ctx, evaluator))
    return outcome


@lru_cache(maxsize=4)
def _synthetic_spec(spec_json: str) -> Any:
    """Parsed once per worker process (a campaign has one spec; parsing it per trial would dominate)."""
    from ..synthetic import SyntheticSpec

    return SyntheticSpec.model_validate_json(spec_json)


def execute_batch(trials: list[Trial], skills: list[SkillInput], ctx: TrialContext,
                  spec: Any, api_base: Optional[str], evaluator: Any) -> list[TrialOutcome]:
    """The Ray task: run trials one after another (synthetic batches; real trials come one per task). On a
    cluster run (`ctx.shared_run_dir`) the task leaves its outcomes, artifacts included, in the run's spool
    before it returns, so they survive the driver; what it returns then carries artifact addresses, not bytes."""
    from .spool import OutcomeSpool

    outcomes = [execute_trial(t, s, ctx, spec, api_base, evaluator) for t, s in zip(trials, skills)]
    if ctx.shared_run_dir is not None:
        outcomes = OutcomeSpool(Path(ctx.shared_run_dir)).write(outcomes)
    return outcomes
