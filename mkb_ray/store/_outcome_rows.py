"""Turning a `TrialOutcome` into the store's rows — pure, no I/O — and checking its AttemptRecord's fields.

`prepare` is the fast path: it reads the record's fields directly and hands back a `Prepared` (the artifact blobs
to write first, then the trials/submissions/usage/skills/artifacts rows, in the column order of `sqlite_store`'s
DDL). Any surprise in the record makes `diagnose` walk it against the field tables below and raise a
`RecordError` that names the trial and the first field that does not fit.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Optional

from ..campaign.trial import Trial, TrialOutcome
from ._schema import (TERMINAL_STATUSES, TIERS, TRIAL_ROW_COLUMNS, RecordError, StoreError, TrialRow,
                      utc_now)


@dataclass
class Prepared:
    """One outcome turned into rows (no I/O yet)."""

    trial_id: str
    outcome_sha: str
    blobs: dict[str, bytes]          # sha -> bytes, written as artifacts before the rows
    trial_update: tuple[Any, ...]
    submissions: list[tuple[Any, ...]]
    usage: list[tuple[Any, ...]]
    skill: Optional[tuple[Any, ...]]
    artifacts: list[tuple[Any, ...]]
    record: Optional[dict[str, Any]]


def plan_row(trial: Trial, order: int) -> tuple[Any, ...]:
    """A planned trial's row, in `sqlite_store._PLAN_COLUMNS` order."""
    return (trial.trial_id, order, trial.model, trial.problem_id, trial.dsl, trial.target, trial.arm, trial.kind,
            trial.replicate, trial.chain, trial.hop, trial.skill_from, trial.arm_name,
            json.dumps(list(trial.depends_on)), trial.config_hash, trial.problem_hash, trial.template_hash)


def trial_row(row: tuple[Any, ...]) -> TrialRow:
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
    artifact_rows = []
    for name, data in outcome.artifacts.items():
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise RecordError(tid, f"artifacts[{name!r}]", f"must be bytes, got {type(data).__name__}")
        data = bytes(data)
        sha = _sha(data)
        blobs[sha] = data
        names[name] = sha
        artifact_rows.append((tid, name, sha, len(data)))
    skill_row = None
    skill_sha = None
    if outcome.skill_md is not None:
        if not isinstance(outcome.skill_md, str):
            raise RecordError(tid, "skill_md", f"must be str, got {type(outcome.skill_md).__name__}")
        data = outcome.skill_md.encode("utf-8")
        skill_sha = _sha(data)
        blobs[skill_sha] = data
        skill_row = (tid, skill_sha, len(data))
    record: Optional[dict[str, Any]] = None
    record_sha = None
    if outcome.record_json is None:
        if outcome.status != "infra_error":
            raise RecordError(tid, "record_json", f"missing; only an infra_error may come without a record "
                                                  f"(status is {outcome.status})")
    else:
        try:
            data = outcome.record_json.encode("utf-8")
            record = json.loads(outcome.record_json)
        except (AttributeError, UnicodeError, ValueError) as err:
            raise RecordError(tid, "record_json", f"not a JSON document: {err}") from None
        if not isinstance(record, dict):
            raise RecordError(tid, "record_json", f"must be a JSON object, got {type(record).__name__}")
        record_sha = _sha(data)
        blobs[record_sha] = data
    try:
        return _rows(outcome, record, names, blobs, artifact_rows, skill_row, skill_sha, record_sha)
    except (KeyError, TypeError, AttributeError, ValueError) as err:
        if record is not None:
            diagnose(tid, record)
        raise RecordError(tid, "record_json", f"unexpected record ({type(err).__name__}: {err})") from None


def _rows(outcome: TrialOutcome, record: Optional[dict[str, Any]], names: dict[str, str],
          blobs: dict[str, bytes], artifact_rows: list[tuple[Any, ...]], skill_row: Optional[tuple[Any, ...]],
          skill_sha: Optional[str], record_sha: Optional[str]) -> Prepared:
    """The fast path: reads the record's fields directly; any surprise raises and `diagnose` names it."""
    tid = outcome.trial_id
    submissions: list[tuple[Any, ...]] = []
    usage: list[tuple[Any, ...]] = []
    final_tier = outcome.final_tier
    error = outcome.error
    denorm: tuple[Any, ...] = (None,) * 11  # stop_reason ... queue_wait_s (see sqlite_store._OUTCOME_COLUMNS)
    finished_at = None
    if record is not None:
        if record["status"] != outcome.status and outcome.status != "infra_error":
            raise RecordError(tid, "status", f"outcome says {outcome.status!r}, its record {record['status']!r}")
        if bool(record.get("synthetic", False)) != bool(outcome.synthetic):
            raise RecordError(tid, "synthetic", f"outcome says {outcome.synthetic}, its record "
                                                f"{record.get('synthetic')}")
        attempt_id = (record.get("config") or {}).get("attempt_id")
        if attempt_id is not None and attempt_id != tid:
            raise RecordError(tid, "config.attempt_id", f"the record is of trial {attempt_id!r}")
        counted = 0
        subs = record["submissions"]
        seen_index: set[int] = set()
        for i, s in enumerate(subs):
            index = s["index"]
            if index in seen_index or not isinstance(index, int) or index < 1:
                raise RecordError(tid, f"submissions[{i}].index", f"{index!r}: indexes are unique and 1-based")
            seen_index.add(index)
            v = s.get("verdict")
            path = s.get("artifact_path")
            kernel_sha = (names.get(path) if path else None) or s.get("kernel_sha256")
            if s["counted"]:
                counted += 1
            if v is None:
                submissions.append((tid, s["index"], 0, s["counted"], s.get("refused_reason"), kernel_sha,
                                    s.get("kernel_bytes"), None, None, None, None, None, None, None, None,
                                    s.get("round_trip_s"), s.get("eval_s"), s.get("queue_wait_s")))
            else:
                tier = v["tier"]
                if tier not in TIERS:
                    raise RecordError(tid, f"submissions[{i}].verdict.tier",
                                      f"{tier!r} is not one of {TIERS}")
                submissions.append((tid, s["index"], 0, s["counted"], s.get("refused_reason"), kernel_sha,
                                    s.get("kernel_bytes"), tier, v["compiled"], v.get("correct"), v.get("speedup"),
                                    v.get("kernel_ms"), v.get("eager_ms"), v.get("rejected_by"), v.get("reason"),
                                    s.get("round_trip_s"), s.get("eval_s"), s.get("queue_wait_s")))
        fv = record.get("final_verdict")
        if fv is not None:
            tier = fv["tier"]
            if tier not in TIERS:
                raise RecordError(tid, "final_verdict.tier", f"{tier!r} is not one of {TIERS}")
            if final_tier is not None and final_tier != tier:
                raise RecordError(tid, "final_tier", f"outcome says {final_tier!r}, the record's final verdict "
                                                     f"{tier!r}")
            final_tier = tier
            path = record.get("final_kernel_path")
            kernel_sha = names.get(path) if path else None
            kernel_bytes = len(blobs[kernel_sha]) if kernel_sha else None
            submissions.append((tid, 0, 1, None, None, kernel_sha or fv.get("source_hash"), kernel_bytes, tier,
                                fv["compiled"], fv.get("correct"), fv.get("speedup"), fv.get("kernel_ms"),
                                fv.get("eager_ms"), fv.get("rejected_by"), fv.get("reason"), None,
                                record.get("final_eval_s"), None))
        seen_index = set()
        for i, c in enumerate(record["llm_calls"]):
            if c["index"] in seen_index:
                raise RecordError(tid, f"llm_calls[{i}].index", f"{c['index']!r} appears twice")
            seen_index.add(c["index"])
            u = c.get("usage") or {}
            usage.append((tid, c["index"], c["turn"], c.get("purpose", "turn"), c["ok"], c.get("error"),
                          u.get("prompt_tokens", 0), u.get("completion_tokens", 0), u.get("cached_tokens", 0),
                          u.get("latency_s", 0.0), u.get("retries", 0), u.get("cost_usd"), u.get("gpu_s")))
        if error is None:
            error = record.get("error")
        finished_at = record.get("finished_at")
        denorm = (record.get("stop_reason"), record.get("turns"), len(subs), counted, record.get("prompt_tokens"),
                  record.get("completion_tokens"), record.get("cached_tokens"), record.get("cost_usd"),
                  record.get("gpu_s"), record.get("wall_s"), record.get("queue_wait_s"))
    if final_tier is not None and final_tier not in TIERS:
        raise RecordError(tid, "final_tier", f"{final_tier!r} is not one of {TIERS}")
    fingerprint = repr((outcome.status, outcome.attempts, final_tier, bool(outcome.synthetic), error, record_sha,
                        skill_sha, sorted((r[1], r[2]) for r in artifact_rows)))
    outcome_sha = _sha(fingerprint.encode())
    trial_update = (outcome.status, outcome.attempts, final_tier, int(bool(outcome.synthetic)), error, record_sha,
                    skill_sha, outcome_sha, finished_at or utc_now()) + denorm + (tid,)
    return Prepared(tid, outcome_sha, blobs, trial_update, submissions, usage, skill_row, artifact_rows, record)


# What `diagnose` expects of a record: field -> (accepted types, required). NUM accepts int and float.
_NUM = (int, float)
_NONE = type(None)
_RECORD_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "status": ((str,), True), "stop_reason": ((str, _NONE), False), "submissions": ((list,), True),
    "llm_calls": ((list,), True), "final_verdict": ((dict, _NONE), False), "final_kernel_path": ((str, _NONE), False),
    "config": ((dict,), False), "turns": ((int,), False), "prompt_tokens": ((int,), False),
    "completion_tokens": ((int,), False), "cached_tokens": ((int,), False), "cost_usd": (_NUM + (_NONE,), False),
    "gpu_s": (_NUM + (_NONE,), False), "wall_s": (_NUM, False), "queue_wait_s": (_NUM, False),
    "final_eval_s": (_NUM, False), "error": ((str, _NONE), False), "finished_at": ((str,), False),
    "synthetic": ((bool,), False)}
_SUBMISSION_FIELDS = {
    "index": ((int,), True), "counted": ((bool,), True), "refused_reason": ((str, _NONE), False),
    "kernel_sha256": ((str, _NONE), False), "kernel_bytes": ((int,), False), "artifact_path": ((str, _NONE), False),
    "verdict": ((dict, _NONE), False), "round_trip_s": (_NUM, False), "eval_s": (_NUM, False),
    "queue_wait_s": (_NUM, False)}
_VERDICT_FIELDS = {
    "tier": ((str,), True), "compiled": ((bool,), True), "correct": ((bool, _NONE), False),
    "speedup": (_NUM + (_NONE,), False), "kernel_ms": (_NUM + (_NONE,), False),
    "eager_ms": (_NUM + (_NONE,), False), "rejected_by": ((str, _NONE), False), "reason": ((str,), False),
    "source_hash": ((str,), False)}
_CALL_FIELDS = {
    "index": ((int,), True), "turn": ((int,), True), "purpose": ((str,), False), "ok": ((bool,), True),
    "error": ((str, _NONE), False), "usage": ((dict,), False)}
_USAGE_FIELDS = {
    "prompt_tokens": ((int,), False), "completion_tokens": ((int,), False), "cached_tokens": ((int,), False),
    "latency_s": (_NUM, False), "retries": ((int,), False), "cost_usd": (_NUM + (_NONE,), False),
    "gpu_s": (_NUM + (_NONE,), False)}


def _check(tid: str, obj: Any, spec: dict[str, tuple[tuple[type, ...], bool]], where: str) -> None:
    if not isinstance(obj, dict):
        raise RecordError(tid, where or "record", f"must be an object, got {type(obj).__name__}")
    for key, (types, required) in spec.items():
        field = f"{where}.{key}" if where else key
        if key not in obj:
            if required:
                raise RecordError(tid, field, "missing")
            continue
        value = obj[key]
        # bool is an int subclass: a bool where a number is expected (or the reverse) is a type error too.
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if not ok:
            names = "/".join("null" if t is _NONE else t.__name__ for t in types)
            raise RecordError(tid, field, f"expected {names}, got {type(value).__name__} {value!r:.80}")


def diagnose(tid: str, record: dict[str, Any]) -> None:
    """Raise a RecordError naming the first field of `record` that does not fit; return if none is found."""
    _check(tid, record, _RECORD_FIELDS, "")
    for i, s in enumerate(record["submissions"]):
        where = f"submissions[{i}]"
        _check(tid, s, _SUBMISSION_FIELDS, where)
        if s.get("verdict") is not None:
            _check(tid, s["verdict"], _VERDICT_FIELDS, f"{where}.verdict")
    if record.get("final_verdict") is not None:
        _check(tid, record["final_verdict"], _VERDICT_FIELDS, "final_verdict")
    for i, c in enumerate(record["llm_calls"]):
        _check(tid, c, _CALL_FIELDS, f"llm_calls[{i}]")
        if "usage" in c:
            _check(tid, c["usage"], _USAGE_FIELDS, f"llm_calls[{i}].usage")
