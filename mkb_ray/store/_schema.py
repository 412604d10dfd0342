"""The run store's shared vocabulary: trial statuses, verdict tiers, the store's errors, the `TrialRow` a stored
trial reads back as, and its time format. Imported by `sqlite_store` (the store) and `_outcome_rows` (turning
outcomes into rows); the public names are re-exported by `mkb_ray.store`.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timezone
from typing import Optional, get_args

from ..records import Tier, TrialStatus

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
class TrialRow:
    """A stored trial: its plan fields, and its outcome fields (None while status is 'planned')."""

    trial_id: str
    plan_order: int
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

    @property
    def done(self) -> bool:
        return self.status in TERMINAL_STATUSES


TRIAL_ROW_COLUMNS = tuple(f.name for f in fields(TrialRow))


def utc_now() -> str:
    """Now, as the store writes times: ISO-8601 UTC text, milliseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
