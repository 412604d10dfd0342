"""The run store's shared vocabulary: trial statuses, verdict tiers, the store's errors, the rows of `trials` (a
`PlanRow` written when a trial is planned, its `OutcomeColumns` when its outcome is, and the `TrialRow` a stored
trial reads back as: both in one), and its time format. Imported by `sqlite_store` (the store) and `_outcome_rows`
(turning outcomes into rows); the public names are re-exported by `mkb_ray.store`.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timezone
from typing import Optional, get_args

from ..records import Tier, Trial, TrialStatus

TERMINAL_STATUSES: tuple[str, ...] = get_args(TrialStatus)   # completed, skipped, error, infra_error
TIERS: tuple[str, ...] = get_args(Tier)                      # fail, pass, pass2x, compile_only


class StoreError(Exception):
    """The store refused an operation; the message says which trial and why."""


class RecordError(StoreError):
    """A malformed or unexpected outcome/record: names the record (a trial, or `kind` and its id: a claim, an
    annotation...) and the field."""

    def __init__(self, trial_id: str, field: str, problem: str, kind: str = "trial") -> None:
        super().__init__(f"{kind} {trial_id!r}: {field}: {problem}")
        self.trial_id = trial_id   # the id of the record `kind` names (a trial id by default)
        self.field = field
        self.kind = kind


@dataclass(frozen=True)
class PlanRow:
    """A planned trial: the plan columns of `trials`, every `Trial` field (depends_on is stored as a JSON array)."""

    trial_id: str
    plan_order: int     # the trial's position in the plan it was first planned by
    model: str
    problem_id: str
    dsl: str
    target: str
    arm: str
    kind: str
    replicate: int
    chain: Optional[int]
    hop: Optional[int]
    skill_from: Optional[str]
    arm_name: Optional[str]
    depends_on: tuple[str, ...]
    config_hash: str
    problem_hash: str
    template_hash: str

    @classmethod
    def of(cls, trial: Trial, order: int) -> "PlanRow":
        """A planned trial's row; `order` is its plan_order."""
        return cls(trial_id=trial.trial_id, plan_order=order, model=trial.model, problem_id=trial.problem_id,
                   dsl=trial.dsl, target=trial.target, arm=trial.arm, kind=trial.kind, replicate=trial.replicate,
                   chain=trial.chain, hop=trial.hop, skill_from=trial.skill_from, arm_name=trial.arm_name,
                   depends_on=tuple(trial.depends_on), config_hash=trial.config_hash,
                   problem_hash=trial.problem_hash, template_hash=trial.template_hash)


@dataclass(frozen=True)
class OutcomeColumns:
    """A trial's outcome columns of `trials`: set when its outcome is written (None, or 0/False, while it is
    'planned')."""

    status: str
    attempts: int
    final_tier: Optional[str]
    synthetic: bool
    error: Optional[str]
    record_sha: Optional[str]
    skill_sha: Optional[str]
    outcome_sha: Optional[str]
    finished_at: Optional[str]
    stop_reason: Optional[str]
    turns: Optional[int]
    n_submissions: Optional[int]
    counted_submissions: Optional[int]
    prompt_tokens: Optional[int]
    completion_tokens: Optional[int]
    cached_tokens: Optional[int]
    cost_usd: Optional[float]
    gpu_s: Optional[float]
    wall_s: Optional[float]
    queue_wait_s: Optional[float]


@dataclass(frozen=True)
class TrialRow(OutcomeColumns, PlanRow):
    """A stored trial, as read back: its plan columns (`PlanRow`'s fields), then its outcome columns
    (`OutcomeColumns`')."""

    @property
    def done(self) -> bool:
        return self.status in TERMINAL_STATUSES


# The columns of `trials` in table order: dataclass fields of a subclass follow its bases' in reverse MRO order,
# so TrialRow's are PlanRow's then OutcomeColumns'.
PLAN_COLUMNS = tuple(f.name for f in fields(PlanRow))
OUTCOME_COLUMNS = tuple(f.name for f in fields(OutcomeColumns))
TRIAL_ROW_COLUMNS = tuple(f.name for f in fields(TrialRow))


def utc_now() -> str:
    """Now, as the store writes times: ISO-8601 UTC text, milliseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
