"""Turning a `TrialOutcome` into the store's rows — pure, no I/O — and checking it on the way.

`prepare` validates the outcome's record with `AttemptRecord.model_validate_json` (a `pydantic.ValidationError`
becomes a `RecordError` naming the trial and the dotted field, e.g. `submissions[0].verdict.tier`), checks what
the record's own shape cannot say (it agrees with its outcome and is this trial's, it writes out its submissions
and calls, its indexes are unique), and builds the rows from the typed record.

Each row type of a child table is a NamedTuple whose fields are its table's columns in order (the columns are
described in `sqlite_store`'s docstring); `sqlite_store` builds its SQL from their `_fields`, and that of `trials`
from the fields of `_schema`'s PlanRow and OutcomeColumns, so rows and columns cannot drift.
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import NamedTuple, Optional, Sequence, Union

from pydantic import ValidationError

from ..records import AttemptRecord, StoredArtifact, TrialOutcome
from ._schema import (TERMINAL_STATUSES, TIERS, TRIAL_ROW_COLUMNS, OutcomeColumns, RecordError, StoreError, TrialRow,
                      utc_now)

_SHA256 = re.compile(r"[0-9a-f]{64}")


class SubmissionRow(NamedTuple):
    """A `submissions` row: one submission (is_final 0), or the attempt's final verdict (idx 0, is_final 1)."""

    trial_id: str
    idx: int
    is_final: int
    counted: Optional[bool]
    refused_reason: Optional[str]
    kernel_sha: Optional[str]
    kernel_bytes: Optional[int]
    tier: Optional[str]
    compiled: Optional[bool]
    correct: Optional[bool]
    speedup: Optional[float]
    kernel_ms: Optional[float]
    eager_ms: Optional[float]
    rejected_by: Optional[str]
    reason: Optional[str]
    round_trip_s: Optional[float]
    eval_s: Optional[float]
    queue_wait_s: Optional[float]


class UsageRow(NamedTuple):
    """A `usage` row: one LLM call."""

    trial_id: str
    idx: int
    turn: int
    purpose: str
    ok: bool
    error: Optional[str]
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    latency_s: float
    retries: int
    cost_usd: Optional[float]
    gpu_s: Optional[float]


class SkillRow(NamedTuple):
    """A `skills` row: the SKILL.md a done trial wrote."""

    trial_id: str
    sha256: str
    bytes: int


class ArtifactRow(NamedTuple):
    """An `artifacts` row: one file of TrialOutcome.artifacts, by its attempt-relative name."""

    trial_id: str
    name: str
    sha256: str
    bytes: int


class Prepared(NamedTuple):
    """One outcome turned into rows (no I/O yet)."""

    trial_id: str
    outcome_sha: str                 # fingerprint of the outcome: an identical re-write is a no-op
    blobs: dict[str, bytes]          # sha -> bytes, written as artifacts before the rows
    stored: tuple[str, ...]          # shas the trial's worker already wrote (StoredArtifact): must be on disk
    outcome: OutcomeColumns          # the trial's outcome columns of `trials`
    submissions: list[SubmissionRow]
    usage: list[UsageRow]
    skill: Optional[SkillRow]
    artifacts: list[ArtifactRow]


def trial_row(row: Sequence[object]) -> TrialRow:
    """A `trials` row selected in `TRIAL_ROW_COLUMNS` order, read back as a TrialRow."""
    values = dict(zip(TRIAL_ROW_COLUMNS, row))
    values["depends_on"] = tuple(json.loads(values["depends_on"]))
    values["synthetic"] = bool(values["synthetic"])
    return TrialRow(**values)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def prepare(outcome: TrialOutcome, run_synthetic: Optional[bool]) -> Prepared:
    """Check an outcome and turn it into rows; raises StoreError/RecordError naming the trial (and the field).
    run_synthetic: the run's `synthetic` meta (None while unset); an outcome of the other kind is refused."""
    tid = outcome.trial_id
    if not isinstance(tid, str) or not tid:
        raise StoreError(f"an outcome has no trial_id (got {tid!r})")
    if outcome.status not in TERMINAL_STATUSES:
        raise RecordError(tid, "status", f"{outcome.status!r} is not one of {TERMINAL_STATUSES}")
    if run_synthetic is not None and bool(outcome.synthetic) != run_synthetic:
        raise RecordError(tid, "synthetic", f"outcome synthetic={outcome.synthetic} in a run with "
                                            f"synthetic={run_synthetic}; synthetic and measured data never mix")
    if not isinstance(outcome.attempts, int) or outcome.attempts < 1:
        raise RecordError(tid, "attempts", f"must be a positive int, got {outcome.attempts!r}")
    if not isinstance(outcome.artifacts, dict):
        raise RecordError(tid, "artifacts", f"must be a dict of name -> bytes, got "
                                            f"{type(outcome.artifacts).__name__}")
    blobs: dict[str, bytes] = {}
    names: dict[str, str] = {}
    sizes: dict[str, int] = {}
    stored: list[str] = []
    artifact_rows = []
    for name, data in outcome.artifacts.items():
        if isinstance(data, StoredArtifact):
            if not _SHA256.fullmatch(str(data.sha256)) or not isinstance(data.size, int) or data.size < 0:
                raise RecordError(tid, f"artifacts[{name!r}]", f"not a valid stored artifact: {data!r}")
            sha, size = data.sha256, data.size
            stored.append(sha)
        elif isinstance(data, (bytes, bytearray, memoryview)):
            data = bytes(data)
            sha, size = _sha(data), len(data)
            blobs[sha] = data
        else:
            raise RecordError(tid, f"artifacts[{name!r}]", f"must be bytes or a StoredArtifact, got "
                                                          f"{type(data).__name__}")
        names[name] = sha
        sizes[sha] = size
        artifact_rows.append(ArtifactRow(trial_id=tid, name=name, sha256=sha, bytes=size))
    skill_row = None
    if outcome.skill_md is not None:
        if not isinstance(outcome.skill_md, str):
            raise RecordError(tid, "skill_md", f"must be str, got {type(outcome.skill_md).__name__}")
        data = outcome.skill_md.encode("utf-8")
        skill_row = SkillRow(trial_id=tid, sha256=_sha(data), bytes=len(data))
        blobs[skill_row.sha256] = data
    record = None
    record_sha = None
    if outcome.record_json is None:
        if outcome.status != "infra_error":
            raise RecordError(tid, "record_json", f"missing; only an infra_error may come without a record "
                                                  f"(status is {outcome.status})")
    else:
        try:
            data = outcome.record_json.encode("utf-8")
        except (AttributeError, UnicodeError) as err:
            raise RecordError(tid, "record_json", f"not a JSON document: {err}") from None
        record = _validated(tid, data)
        record_sha = _sha(data)
        blobs[record_sha] = data
    submissions: list[SubmissionRow] = []
    usage: list[UsageRow] = []
    final_tier = outcome.final_tier
    if record is not None:
        _check_record(outcome, record)
        submissions = _submission_rows(tid, record, names, sizes)
        usage = _usage_rows(tid, record)
        if record.final_verdict is not None:
            final_tier = record.final_verdict.tier
    if final_tier is not None and final_tier not in TIERS:
        raise RecordError(tid, "final_tier", f"{final_tier!r} is not one of {TIERS}")
    error = outcome.error if outcome.error is not None or record is None else record.error
    skill_sha = skill_row.sha256 if skill_row is not None else None
    # The same fingerprint as every earlier version of the store: a resumed run re-sends identical outcomes.
    fingerprint = repr((outcome.status, outcome.attempts, final_tier, bool(outcome.synthetic), error, record_sha,
                        skill_sha, sorted((r.name, r.sha256) for r in artifact_rows)))
    outcome_sha = _sha(fingerprint.encode())
    columns = OutcomeColumns(
        status=outcome.status, attempts=outcome.attempts, final_tier=final_tier,
        synthetic=bool(outcome.synthetic), error=error, record_sha=record_sha, skill_sha=skill_sha,
        outcome_sha=outcome_sha, finished_at=record.finished_at if record is not None else utc_now(),
        **_figures(record))
    return Prepared(tid, outcome_sha, blobs, tuple(stored), columns, submissions, usage, skill_row,
                    artifact_rows)


_FIGURES = ("stop_reason", "turns", "n_submissions", "counted_submissions", "prompt_tokens", "completion_tokens",
            "cached_tokens", "cost_usd", "gpu_s", "wall_s", "queue_wait_s")


def _figures(record: Optional[AttemptRecord]) -> dict[str, object]:
    """The figures a `trials` row copies from its record for fast queries (all NULL without a record)."""
    if record is None:
        return dict.fromkeys(_FIGURES)
    return dict(stop_reason=record.stop_reason, turns=record.turns, n_submissions=len(record.submissions),
                counted_submissions=record.counted_submissions, prompt_tokens=record.prompt_tokens,
                completion_tokens=record.completion_tokens, cached_tokens=record.cached_tokens,
                cost_usd=record.cost_usd, gpu_s=record.gpu_s, wall_s=record.wall_s, queue_wait_s=record.queue_wait_s)


def _validated(tid: str, data: bytes) -> AttemptRecord:
    """The record, validated strictly: JSON values must already have their field's type ("yes" is no bool, 1.0
    no int), as the store's STRICT tables would demand of them anyway."""
    try:
        return AttemptRecord.model_validate_json(data, strict=True)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        if not first["loc"]:  # the document itself
            problem = first["msg"] if first["type"] != "json_invalid" else f"not a JSON document: {first['msg']}"
            raise RecordError(tid, "record_json", problem) from None
        got = "" if first["type"] == "missing" else f", got {first['input']!r:.80}"
        more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
        raise RecordError(tid, _dotted(first["loc"]), f"{first['msg']}{got}{more}") from None


def _dotted(loc: Sequence[Union[int, str]]) -> str:
    """A pydantic error location as a field path: ('submissions', 0, 'verdict', 'tier') is
    submissions[0].verdict.tier."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else part
    return path


def _check_record(outcome: TrialOutcome, record: AttemptRecord) -> None:
    """What the record's shape cannot say: it agrees with its outcome, it is this trial's, it lists what the
    rows are built from (the indexes are checked as the rows are built)."""
    tid = outcome.trial_id
    if record.status != outcome.status and outcome.status != "infra_error":
        raise RecordError(tid, "status", f"outcome says {outcome.status!r}, its record {record.status!r}")
    if record.synthetic != bool(outcome.synthetic):
        raise RecordError(tid, "synthetic", f"outcome says {outcome.synthetic}, its record {record.synthetic}")
    attempt_id = record.config.attempt_id
    if attempt_id is not None and attempt_id != tid:
        raise RecordError(tid, "config.attempt_id", f"the record is of trial {attempt_id!r}")
    # AttemptRecord defaults both lists to []: a record that leaves one out would be stored as an attempt with no
    # submissions (or calls) without a word, so the store asks for them written out, as model_dump_json does.
    for listed in ("submissions", "llm_calls"):
        if listed not in record.model_fields_set:
            raise RecordError(tid, listed, "missing")
    fv = record.final_verdict
    if fv is not None and outcome.final_tier is not None and outcome.final_tier != fv.tier:
        raise RecordError(tid, "final_tier", f"outcome says {outcome.final_tier!r}, the record's final verdict "
                                             f"{fv.tier!r}")


def _submission_rows(tid: str, record: AttemptRecord, names: dict[str, str],
                     sizes: dict[str, int]) -> list[SubmissionRow]:
    """Every submission of the record, then its final verdict. names: artifact name -> sha; sizes: sha -> bytes."""
    submissions: list[SubmissionRow] = []
    seen: set[int] = set()
    for i, s in enumerate(record.submissions):
        if s.index in seen or s.index < 1:
            raise RecordError(tid, f"submissions[{i}].index", f"{s.index!r}: indexes are unique and 1-based")
        seen.add(s.index)
        # The artifact's address when the kernel file was handed over; else the sha the record names.
        kernel_sha = (names.get(s.artifact_path) if s.artifact_path else None) or s.kernel_sha256
        v = s.verdict or _NO_VERDICT
        submissions.append(SubmissionRow(
            trial_id=tid, idx=s.index, is_final=0, counted=s.counted, refused_reason=s.refused_reason,
            kernel_sha=kernel_sha, kernel_bytes=s.kernel_bytes, tier=v.tier, compiled=v.compiled,
            correct=v.correct, speedup=v.speedup, kernel_ms=v.kernel_ms, eager_ms=v.eager_ms,
            rejected_by=v.rejected_by, reason=v.reason, round_trip_s=s.round_trip_s, eval_s=s.eval_s,
            queue_wait_s=s.queue_wait_s))
    fv = record.final_verdict
    if fv is not None:
        path = record.final_kernel_path
        kernel_sha = names.get(path) if path else None
        submissions.append(SubmissionRow(
            trial_id=tid, idx=0, is_final=1, counted=None, refused_reason=None,
            kernel_sha=kernel_sha or fv.source_hash, kernel_bytes=sizes[kernel_sha] if kernel_sha else None,
            tier=fv.tier, compiled=fv.compiled, correct=fv.correct, speedup=fv.speedup, kernel_ms=fv.kernel_ms,
            eager_ms=fv.eager_ms, rejected_by=fv.rejected_by, reason=fv.reason, round_trip_s=None,
            eval_s=record.final_eval_s, queue_wait_s=None))
    return submissions


def _usage_rows(tid: str, record: AttemptRecord) -> list[UsageRow]:
    """Every LLM call of the record."""
    usage: list[UsageRow] = []
    seen: set[int] = set()
    for i, c in enumerate(record.llm_calls):
        if c.index in seen:
            raise RecordError(tid, f"llm_calls[{i}].index", f"{c.index!r} appears twice")
        seen.add(c.index)
        u = c.usage
        usage.append(UsageRow(
            trial_id=tid, idx=c.index, turn=c.turn, purpose=c.purpose, ok=c.ok, error=c.error,
            prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens, cached_tokens=u.cached_tokens,
            latency_s=u.latency_s, retries=u.retries, cost_usd=u.cost_usd, gpu_s=u.gpu_s))
    return usage


class _NoVerdict:
    """The verdict columns of a submission that was never judged (refused): all NULL."""

    tier = compiled = correct = speedup = kernel_ms = eager_ms = rejected_by = reason = None


_NO_VERDICT = _NoVerdict()
