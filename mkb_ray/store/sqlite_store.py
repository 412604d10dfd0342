"""The run store: the source of truth of a campaign — SQLite (`<run_dir>/store.sqlite`) plus content-addressed
artifact files (`<run_dir>/artifacts/`).

Durability. WAL journal with synchronous=NORMAL: a committed transaction survives the process being killed
(kill -9, OOM) — the WAL is in the OS page cache — though the last commits may be lost on a power failure.
`write_outcomes` writes a batch's artifact files first, then its rows in ONE transaction: a trial counts as done
only once that commit lands, and a crash at any point leaves either the whole batch or none of it.

Single writer. Only the driver process writes (the scheduler hands it `TrialOutcome`s); a writer holds an
exclusive `flock` on `<run_dir>/store.lock` for its lifetime, so a second writer fails at once with the holder's
pid (the lock dies with its process, so a killed driver never leaves a stale lock). Readers (exports, analysis,
live progress) open with `readonly=True` and may run beside the writer. One RunStore may be used from several
threads (e.g. `asyncio.to_thread`); calls are serialised by a lock.

Schema (schema_version 1; every table STRICT):
    meta        (key, value): schema_version, created_at, config_json, config_hash, synthetic ("0"/"1")
    trials      one row per planned trial: every `Trial` field (depends_on as a JSON array, plan_order = position
                in the plan), `status` ('planned' until an outcome is written, then the TrialOutcome status),
                attempts, final_tier, synthetic, error, record_sha (artifact of the AttemptRecord JSON), skill_sha,
                outcome_sha (fingerprint of the written outcome, for idempotent re-writes), finished_at, and
                figures denormalised from the record for fast queries: stop_reason, turns, n_submissions,
                counted_submissions, prompt/completion/cached tokens, cost_usd, gpu_s, wall_s, queue_wait_s
    submissions one row per submission (idx = SubmissionRecord.index, 1-based, refused ones included,
                is_final=0) plus the attempt's final verdict as a row with idx=0, is_final=1 (its kernel_sha is the
                final kernel's, counted/refused_reason/round_trip_s/queue_wait_s are NULL there). kernel_sha is the
                sha256 of the kernel source, which is its artifact address when the kernel file was handed over.
                Verdict columns: tier, compiled, correct, speedup, kernel_ms, eager_ms, rejected_by, reason, eval_s
    usage       one row per LLM call: idx, turn, purpose, ok, error, prompt/completion/cached tokens, latency_s,
                retries, cost_usd, gpu_s
    skills      (trial_id, sha256, bytes): the SKILL.md a done trial wrote (TrialOutcome.skill_md)
    artifacts   (trial_id, name, sha256, bytes): each file of TrialOutcome.artifacts, by attempt-relative name
    events      (id, ts, kind, trial_id, data JSON): scheduler events (see STANDARD_EVENT_KINDS) and the store's
                own: `rerun_stale` and `rerun_dependant` (written by `campaign.reconcile.rerun_stale` through
                `reset_trials`), `config_changed`
    claims, skills_segmented, annotations, lineage_edges, lineage_runs: what SKILL.md texts assert and how claims
                descend along chains, read and written through `RunStore.claims` (`claims_tables.ClaimTables`;
                added without a version bump: a store made before them gains them when opened for writing)
Booleans are INTEGER 0/1; times are ISO-8601 UTC text; durations are seconds (`_s`), kernel times milliseconds.

Beside this module: `_outcome_rows` turns an outcome into these rows (pure; it validates the AttemptRecord and names
the bad field of a malformed one), each a NamedTuple whose fields are its table's columns, from which the SQL here
is built; `_schema` holds what both share (statuses, tiers, StoreError/RecordError, the rows of `trials`: PlanRow,
OutcomeColumns, TrialRow). The store persists and queries; comparing a plan with what is stored (new, done, stale
trials, and resetting stale ones with their dependants) is the campaign's (`mkb_ray.campaign.reconcile`).
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import sqlite3
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from operator import attrgetter
from typing import Any, Iterable, Iterator, NamedTuple, Optional, Sequence

from ..records import TrialOutcome, downstream
from ._outcome_rows import ArtifactRow, Prepared, SkillRow, SubmissionRow, UsageRow, prepare, trial_row
from ._schema import (OUTCOME_COLUMNS, PLAN_COLUMNS, TERMINAL_STATUSES, TRIAL_ROW_COLUMNS, PlanRow, RecordError,
                      StoreError, TrialRow, utc_now)
from .artifacts import ArtifactMissing, ArtifactStore
from .claims_tables import CLAIMS_DDL, ClaimTables, Segmentation

__all__ = ["ARTIFACTS_DIR", "LOCK_FILE", "SCHEMA_VERSION", "STANDARD_EVENT_KINDS", "STORE_FILE", "TERMINAL_STATUSES",
           "ClaimTables", "Event", "NewEvent", "OutcomeConflict", "PlanRow", "PlanState", "RecordError", "RunStore",
           "Segmentation", "SkillLink", "StoreError", "StoreLocked", "TrialRow"]

SCHEMA_VERSION = 1
STORE_FILE = "store.sqlite"
LOCK_FILE = "store.lock"
ARTIFACTS_DIR = "artifacts"
# The kinds the scheduler logs; `log_event` accepts any snake_case kind, these are the documented ones.
STANDARD_EVENT_KINDS = ("started", "retry", "infra_error", "evaluator_restart", "server_restart", "interrupted",
                        "resumed", "rerun_stale", "rerun_dependant", "config_changed", "spool_ingested", "adopted")
_EVENT_KIND = re.compile(r"[a-z][a-z0-9_]*")
_CHUNK = 500  # ids per IN (...) query

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
CREATE TABLE IF NOT EXISTS trials (
    trial_id TEXT PRIMARY KEY, plan_order INTEGER NOT NULL,
    model TEXT NOT NULL, problem_id TEXT NOT NULL, dsl TEXT NOT NULL, target TEXT NOT NULL, arm TEXT NOT NULL,
    kind TEXT NOT NULL, replicate INTEGER NOT NULL, chain INTEGER, hop INTEGER, skill_from TEXT, arm_name TEXT,
    depends_on TEXT NOT NULL, config_hash TEXT NOT NULL, problem_hash TEXT NOT NULL, template_hash TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'planned', attempts INTEGER NOT NULL DEFAULT 0, final_tier TEXT,
    synthetic INTEGER NOT NULL DEFAULT 0, error TEXT, record_sha TEXT, skill_sha TEXT, outcome_sha TEXT,
    finished_at TEXT, stop_reason TEXT, turns INTEGER, n_submissions INTEGER, counted_submissions INTEGER,
    prompt_tokens INTEGER, completion_tokens INTEGER, cached_tokens INTEGER, cost_usd REAL, gpu_s REAL,
    wall_s REAL, queue_wait_s REAL
) STRICT;
CREATE INDEX IF NOT EXISTS trials_status ON trials (status);
CREATE TABLE IF NOT EXISTS submissions (
    trial_id TEXT NOT NULL REFERENCES trials (trial_id), idx INTEGER NOT NULL, is_final INTEGER NOT NULL,
    counted INTEGER, refused_reason TEXT, kernel_sha TEXT, kernel_bytes INTEGER,
    tier TEXT, compiled INTEGER, correct INTEGER, speedup REAL, kernel_ms REAL, eager_ms REAL, rejected_by TEXT,
    reason TEXT, round_trip_s REAL, eval_s REAL, queue_wait_s REAL,
    PRIMARY KEY (trial_id, idx)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS usage (
    trial_id TEXT NOT NULL REFERENCES trials (trial_id), idx INTEGER NOT NULL, turn INTEGER NOT NULL,
    purpose TEXT NOT NULL, ok INTEGER NOT NULL, error TEXT, prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL, cached_tokens INTEGER NOT NULL, latency_s REAL NOT NULL,
    retries INTEGER NOT NULL, cost_usd REAL, gpu_s REAL,
    PRIMARY KEY (trial_id, idx)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS skills (
    trial_id TEXT PRIMARY KEY REFERENCES trials (trial_id), sha256 TEXT NOT NULL, bytes INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS artifacts (
    trial_id TEXT NOT NULL REFERENCES trials (trial_id), name TEXT NOT NULL, sha256 TEXT NOT NULL,
    bytes INTEGER NOT NULL, PRIMARY KEY (trial_id, name)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, ts TEXT NOT NULL, kind TEXT NOT NULL, trial_id TEXT,
    data TEXT NOT NULL
) STRICT;
"""


# Every statement that writes rows takes its columns from its row type's fields (see `_outcome_rows`).
def _insert(table: str, columns: Sequence[str], verb: str = "INSERT") -> str:
    return f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def _update(columns: Sequence[str], where: str) -> str:
    return f"UPDATE trials SET {', '.join(f'{c} = ?' for c in columns)} WHERE {where}"


# An update names its row last: its columns' values, then the trial_id.
_INSERT_PLAN = _insert("trials", PLAN_COLUMNS, "INSERT OR IGNORE")
_UPDATE_PLAN = _update(PLAN_COLUMNS[1:], "trial_id = ?")
_UPDATE_OUTCOME = _update(OUTCOME_COLUMNS, "trial_id = ? AND status = 'planned'")
_PLAN_VALUES = attrgetter(*PLAN_COLUMNS)
_OUTCOME_VALUES = attrgetter(*OUTCOME_COLUMNS)
_DEPENDS_ON = PLAN_COLUMNS.index("depends_on")


def _plan_values(row: PlanRow) -> tuple[Any, ...]:
    """A plan row's column values, depends_on as the JSON array the table holds."""
    values = _PLAN_VALUES(row)
    return (*values[:_DEPENDS_ON], json.dumps(list(row.depends_on)), *values[_DEPENDS_ON + 1:])
_INSERT_SUBMISSION = _insert("submissions", SubmissionRow._fields)
_INSERT_USAGE = _insert("usage", UsageRow._fields)
_INSERT_SKILL = _insert("skills", SkillRow._fields)
_INSERT_ARTIFACT = _insert("artifacts", ArtifactRow._fields)
_CHILD_TABLES = ("submissions", "usage", "skills", "artifacts")   # what an outcome fills besides its trials row


class OutcomeConflict(StoreError):
    """An outcome was written for a trial that is already done with a different outcome."""


class StoreLocked(StoreError):
    """Another process holds the run store open for writing."""


class PlanState(NamedTuple):
    """What the store holds of a planned trial that reconciling a plan with it compares (`plan_states`)."""

    status: str
    config_hash: str
    problem_hash: str
    template_hash: str
    plan_order: int


class SkillLink(NamedTuple):
    """A stored trial, the trial whose SKILL.md it reads (None: none), and its status (`skill_links`)."""

    trial_id: str
    skill_from: Optional[str]
    status: str


class NewEvent(NamedTuple):
    """An event to write with other rows in one transaction (`reset_trials`); `data` as in `log_event`."""

    kind: str
    trial_id: Optional[str]
    data: dict[str, Any]


@dataclass(frozen=True)
class Event:
    """One scheduler event; `data` is the keyword arguments given to `log_event`."""

    id: int
    ts: str
    kind: str
    trial_id: Optional[str]
    data: dict[str, Any]


class RunStore:
    """The SQLite run store of one run directory. Use as a context manager, or call `close()`.

    `readonly=True` opens an existing store for reading only (no lock taken; the writer may be running).
    `claims`: the claim tables (`ClaimTables`), on this store's connection, lock and transactions.
    """

    def __init__(self, run_dir: Path, readonly: bool = False) -> None:
        self.run_dir = Path(run_dir)
        self.readonly = readonly
        self.path = self.run_dir / STORE_FILE
        self.artifacts = ArtifactStore(self.run_dir / ARTIFACTS_DIR)
        self._lock = threading.RLock()
        self._lock_fd: Optional[int] = None
        if readonly:
            if not self.path.is_file():
                raise StoreError(f"no run store at {self.path}")
            self._conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True,
                                         isolation_level=None, check_same_thread=False, timeout=30.0)
            self._conn.execute("PRAGMA busy_timeout = 30000")
            self._check_schema()
            self.claims = ClaimTables(self._conn, self._lock, self._transaction)
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        try:
            self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
            mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise StoreError(f"{self.path}: SQLite refused WAL journal mode (got {mode!r})")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._conn.execute("PRAGMA busy_timeout = 30000")
            # executescript manages its own transaction (it commits any pending one first), hence BEGIN/COMMIT here.
            self._conn.executescript(f"BEGIN IMMEDIATE; {_DDL} {CLAIMS_DDL} COMMIT;")
            with self._transaction():
                self._conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                self._conn.execute("INSERT OR IGNORE INTO meta VALUES ('created_at', ?)", (utc_now(),))
            self._check_schema()
            self.claims = ClaimTables(self._conn, self._lock, self._transaction)
        except BaseException:
            self.close()
            raise

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def _take_lock(self) -> None:
        fd = os.open(self.run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreLocked(f"{self.run_dir} is open for writing by another process (pid {holder}); the store "
                              "has a single writer — open it with readonly=True to read") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def _check_schema(self) -> None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None or int(row[0]) != SCHEMA_VERSION:
            found = None if row is None else row[0]
            raise StoreError(f"{self.path}: schema_version {found}, this mkb-ray reads {SCHEMA_VERSION}")

    def close(self) -> None:
        with self._lock:
            conn = getattr(self, "_conn", None)
            if conn is not None:
                conn.close()
                self._conn = None  # type: ignore[assignment]
            self.artifacts.close()
            if self._lock_fd is not None:
                os.close(self._lock_fd)  # releases the flock
                self._lock_fd = None

    def __enter__(self) -> "RunStore":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def connection(self) -> sqlite3.Connection:
        """The SQLite connection, for read queries (exports, analysis). Writes go through the methods."""
        return self._conn

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        if self.readonly:
            raise StoreError(f"{self.path} was opened readonly")
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    # -- meta --------------------------------------------------------------------------------------------------
    def set_meta(self, config_json: str, config_hash: str, synthetic: bool) -> None:
        """Record the run's resolved config. A run is synthetic or not for its whole life: changing that is
        refused. A changed config (resume after an edit) is recorded, with a `config_changed` event."""
        try:
            json.loads(config_json)
        except (TypeError, ValueError) as err:
            raise StoreError(f"set_meta: config_json is not a JSON document: {err}") from None
        with self._lock:
            current = self.meta()
            if "synthetic" in current and current["synthetic"] != synthetic:
                raise StoreError(f"{self.run_dir} holds a {'synthetic' if current['synthetic'] else 'measured'} "
                                 f"run; refusing to mix in {'synthetic' if synthetic else 'measured'} data")
            with self._transaction():
                if current.get("config_hash") not in (None, config_hash):
                    self._insert_event("config_changed", None,
                                       {"old_config_hash": current["config_hash"], "new_config_hash": config_hash})
                self._conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [
                    ("config_json", config_json), ("config_hash", config_hash), ("synthetic", str(int(synthetic)))])

    def meta(self) -> dict[str, Any]:
        """schema_version (int), created_at, and once set: config_json, config_hash, synthetic (bool)."""
        with self._lock:
            rows = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
        out: dict[str, Any] = dict(rows)
        out["schema_version"] = int(rows["schema_version"])
        if "synthetic" in rows:
            out["synthetic"] = rows["synthetic"] == "1"
        return out

    # -- the plan's rows (campaign/reconcile.py compares a plan with them) -------------------------------------
    def plan_states(self) -> dict[str, PlanState]:
        """Every stored trial's status, hashes and plan_order, by trial id."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT trial_id, status, config_hash, problem_hash, template_hash, plan_order FROM trials").fetchall()
        return {row[0]: PlanState._make(row[1:]) for row in rows}

    def write_plan(self, new: Sequence[PlanRow], replaced: Sequence[PlanRow] = ()) -> None:
        """In one transaction: insert `new` trials as 'planned' (one already stored is left as it is) and replace
        the plan columns of the stored trials `replaced` names (their outcome columns are kept)."""
        with self._transaction():
            self._conn.executemany(_INSERT_PLAN, map(_plan_values, new))
            self._replace_plan_rows(replaced)

    def _replace_plan_rows(self, rows: Sequence[PlanRow]) -> None:
        self._conn.executemany(_UPDATE_PLAN, [(*values[1:], values[0]) for values in map(_plan_values, rows)])

    def reset_trials(self, ids: Sequence[str], replanned: Sequence[PlanRow], events: Sequence[NewEvent]) -> None:
        """In one transaction: set the trials `ids` back to 'planned' (their outcome columns cleared, their
        submission/usage/skill/artifact rows deleted; the artifact files are kept), give those of `replanned` its
        plan columns, and append `events`."""
        ids = list(ids)
        cleared = ", ".join(f"{c} = NULL" for c in OUTCOME_COLUMNS if c not in ("status", "attempts", "synthetic"))
        with self._transaction():
            for table in _CHILD_TABLES:
                self._conn.executemany(f"DELETE FROM {table} WHERE trial_id = ?", [(t,) for t in ids])
            self._replace_plan_rows(replanned)
            self._conn.executemany(f"UPDATE trials SET status = 'planned', attempts = 0, synthetic = 0, {cleared} "
                                   "WHERE trial_id = ?", [(t,) for t in ids])
            for event in events:
                self._insert_event(*event)

    def skill_links(self) -> list[SkillLink]:
        """Every stored trial with the trial it reads a SKILL.md from and its status, in plan order."""
        with self._lock:
            rows = self._conn.execute("SELECT trial_id, skill_from, status FROM trials ORDER BY plan_order").fetchall()
        return [SkillLink._make(row) for row in rows]

    def dependants(self, ids: Iterable[str]) -> set[str]:
        """Every stored trial that depends on these, directly or through a chain (skill_from), excluding them."""
        with self._lock:
            edges = self._conn.execute("SELECT skill_from, trial_id FROM trials WHERE skill_from IS NOT NULL"
                                       ).fetchall()
        return downstream(edges, ids)

    # -- queries -----------------------------------------------------------------------------------------------
    def done_ids(self) -> set[str]:
        """Trials with a terminal status (their outcome is committed)."""
        with self._lock:
            return {r[0] for r in self._conn.execute("SELECT trial_id FROM trials WHERE status != 'planned'")}

    def status_counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._conn.execute("SELECT status, COUNT(*) FROM trials GROUP BY status").fetchall())

    def trial_rows(self) -> Iterator[TrialRow]:
        """Every stored trial, in plan order (a snapshot taken when iteration starts)."""
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {', '.join(TRIAL_ROW_COLUMNS)} FROM trials ORDER BY plan_order").fetchall()
        for row in rows:
            yield trial_row(row)

    def trials_by_id(self, ids: Iterable[str]) -> dict[str, TrialRow]:
        """The stored trials among `ids`, by id (those not stored are left out)."""
        with self._lock:
            rows = self._query_ids(f"SELECT {', '.join(TRIAL_ROW_COLUMNS)} FROM trials WHERE trial_id IN ({{}})",
                                   list(dict.fromkeys(ids)))
        return {row.trial_id: row for row in map(trial_row, rows)}

    def trial(self, trial_id: str) -> Optional[TrialRow]:
        with self._lock:
            row = self._conn.execute(f"SELECT {', '.join(TRIAL_ROW_COLUMNS)} FROM trials WHERE trial_id = ?",
                                     (trial_id,)).fetchone()
        return None if row is None else trial_row(row)

    def skill_text(self, trial_id: str) -> Optional[str]:
        """The SKILL.md a done trial wrote (possibly empty); None when it is not done or wrote none."""
        with self._lock:
            row = self._conn.execute("SELECT sha256 FROM skills WHERE trial_id = ?", (trial_id,)).fetchone()
        return None if row is None else self.artifacts.get(row[0]).decode("utf-8")

    def skill_text_of(self, skill_sha: str) -> Optional[str]:
        """A stored SKILL.md by its sha256 (a trial's `skill_sha`); None when no such text is stored."""
        try:
            return self.artifacts.get(skill_sha).decode("utf-8")
        except ArtifactMissing:
            return None

    def skill_sizes(self) -> dict[str, int]:
        """trial id → bytes of the SKILL.md it wrote (0: an empty one), for done trials that stored one."""
        with self._lock:
            return dict(self._conn.execute("SELECT trial_id, bytes FROM skills"))

    def record_json(self, trial_id: str) -> Optional[str]:
        """The AttemptRecord JSON of a done trial, as written; None when there is none."""
        with self._lock:
            row = self._conn.execute("SELECT record_sha FROM trials WHERE trial_id = ?", (trial_id,)).fetchone()
        return None if row is None or row[0] is None else self.artifacts.get(row[0]).decode("utf-8")

    def artifact_text(self, trial_id: str, name: str) -> Optional[str]:
        """One artifact file of a done trial (e.g. 'transcript.jsonl'), as text; None when it has no such file."""
        with self._lock:
            row = self._conn.execute("SELECT sha256 FROM artifacts WHERE trial_id = ? AND name = ?",
                                     (trial_id, name)).fetchone()
        if row is None:
            return None
        try:
            return self.artifacts.get(row[0]).decode("utf-8", errors="replace")
        except ArtifactMissing:
            return None

    def _query_ids(self, sql: str, ids: Sequence[str]) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start:start + _CHUNK]
            out.extend(self._conn.execute(sql.format(", ".join("?" * len(chunk))), chunk).fetchall())
        return out

    # -- events ------------------------------------------------------------------------------------------------
    def log_event(self, kind: str, trial_id: Optional[str] = None, **data: Any) -> None:
        """Append a scheduler event (committed at once). `kind` is snake_case; STANDARD_EVENT_KINDS lists the
        documented ones. `data` must be JSON-serialisable (other values are stored as their str())."""
        if not _EVENT_KIND.fullmatch(kind):
            raise ValueError(f"event kind must be snake_case, got {kind!r} (standard: {STANDARD_EVENT_KINDS})")
        with self._transaction():
            self._insert_event(kind, trial_id, data)

    def _insert_event(self, kind: str, trial_id: Optional[str], data: dict[str, Any]) -> None:
        self._conn.execute("INSERT INTO events (ts, kind, trial_id, data) VALUES (?, ?, ?, ?)",
                           (utc_now(), kind, trial_id, json.dumps(data, sort_keys=True, default=str)))

    def events(self, kind: Optional[str] = None) -> list[Event]:
        sql = "SELECT id, ts, kind, trial_id, data FROM events"
        with self._lock:
            rows = (self._conn.execute(sql + " WHERE kind = ? ORDER BY id", (kind,)) if kind is not None
                    else self._conn.execute(sql + " ORDER BY id")).fetchall()
        return [Event(r[0], r[1], r[2], r[3], json.loads(r[4])) for r in rows]

    # -- outcomes ----------------------------------------------------------------------------------------------
    def write_outcomes(self, outcomes: Sequence[TrialOutcome]) -> None:
        """Commit a batch of outcomes: all of it or (on any error) none of it.

        Artifact files first (content-addressed: record JSON, SKILL.md, every file of `artifacts`), then every
        row in ONE transaction. An outcome for a trial that is already done is a no-op when identical to the
        stored one (same status, record, artifacts, error, attempts...) and refused with `OutcomeConflict`
        otherwise, before anything of the batch is written. A trial must have been planned (`write_plan`).
        """
        if not outcomes:
            return
        with self._lock:
            run_synthetic = self.meta().get("synthetic")
            prepared: dict[str, Prepared] = {}
            for outcome in outcomes:
                item = prepare(outcome, run_synthetic)
                previous = prepared.get(item.trial_id)
                if previous is not None and previous.outcome_sha != item.outcome_sha:
                    raise OutcomeConflict(f"trial {item.trial_id!r}: two different outcomes in one batch")
                prepared[item.trial_id] = item
            states = {r[0]: (r[1], r[2]) for r in self._query_ids(
                "SELECT trial_id, status, outcome_sha FROM trials WHERE trial_id IN ({})", list(prepared))}
            todo: list[Prepared] = []
            for tid, item in prepared.items():
                state = states.get(tid)
                if state is None:
                    raise StoreError(f"trial {tid!r} is not in the plan: plan it (campaign.reconcile.record_plan) "
                                     "before writing its outcome")
                status, outcome_sha = state
                if status == "planned":
                    todo.append(item)
                elif outcome_sha != item.outcome_sha:
                    raise OutcomeConflict(f"trial {tid!r} is already done (status {status}) with a different "
                                          "outcome; refusing to overwrite it (campaign.reconcile.rerun_stale "
                                          "resets stale trials)")
            if not todo:
                return
            for item in todo:
                missing = [sha for sha in item.stored if not self.artifacts.has(sha)]
                if missing:
                    raise RecordError(item.trial_id, "artifacts", f"{len(missing)} artifact(s) its worker reported "
                                      f"stored are not in {self.artifacts.root} (first: {missing[0]}); nothing of "
                                      "this batch was written")
            self.artifacts.put_many(blob for item in todo for blob in item.blobs.items())
            try:
                with self._transaction():
                    before = self._conn.total_changes
                    self._conn.executemany(_UPDATE_OUTCOME, [(*_OUTCOME_VALUES(i.outcome), i.trial_id) for i in todo])
                    if self._conn.total_changes - before != len(todo):
                        raise StoreError("a trial of this batch changed status while it was written (is there a "
                                         "second writer?)")
                    self._conn.executemany(_INSERT_SUBMISSION, [r for i in todo for r in i.submissions])
                    self._conn.executemany(_INSERT_USAGE, [r for i in todo for r in i.usage])
                    self._conn.executemany(_INSERT_SKILL, [i.skill for i in todo if i.skill is not None])
                    self._conn.executemany(_INSERT_ARTIFACT, [r for i in todo for r in i.artifacts])
            except (sqlite3.IntegrityError, sqlite3.InterfaceError, sqlite3.ProgrammingError,
                    OverflowError) as err:
                # A row SQLite refused that the record's validation let through (an integer past 64 bits...):
                # the batch was rolled back.
                raise StoreError(f"batch of {len(todo)} outcomes refused by SQLite, nothing written: {err}") \
                    from err
