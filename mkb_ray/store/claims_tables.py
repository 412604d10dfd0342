"""The run store's claim tables: what each SKILL.md asserts, how each claim was annotated, and how claims descend
along a chain — plus the markers that make `mkb lineage` incremental. A `RunStore` holds its `ClaimTables` as
`store.claims`, on the store's connection, lock and transactions.

Tables (created with the others, STRICT; a run directory made before them gains them when opened for writing):
    claims            (claim_id PK, skill_sha, idx, text, start, end, section) ← ClaimRecord (idx = .index);
                      unique (skill_sha, idx). start/end are character offsets into the segmented text.
    skills_segmented  (skill_sha PK, segmenter, n_claims, at): every SKILL.md text segmented, even into zero
                      claims, so a rerun skips it.
    annotations       (claim_id → claims, annotator, taxonomy, status, category, modality, support,
                      support_reason, confidence, reason; PK (claim_id, annotator, taxonomy)) ← AnnotationRecord
    lineage_edges     (chain_id, hop, parent_id → claims, child_id → claims, edge, similarity, matcher;
                      PK (chain_id, parent_id, child_id, matcher)) ← LineageEdgeRecord
    lineage_runs      (chain_id, matcher, annotator, hops_done, at; PK (chain_id, matcher, annotator)): hops 1..
                      hops_done of that chain are matched, so a rerun matches only the hops after them.
Edges are keyed by matcher, not by annotator: a matcher whose edge labels depend on the annotator's modalities
should name the annotator in its `matcher` string, or two annotators' edges overwrite each other.

Writes validate every record (strictly, as the STRICT tables would) and what a record alone cannot say (a claim is
its skill's, an annotated claim has a category, an edge's claims exist...), refusing the whole batch with a
`RecordError` that names the record and the field before anything is written; then write the batch in ONE
transaction with INSERT OR REPLACE, so writing the same thing twice changes nothing. A skill whose stored claims
differ from the ones written now (another segmenter, or another version of one) has them replaced: the old
claims' annotations and lineage edges go with them, and so do the lineage_runs of the chains those edges were in.
Reads return the records (a read-only store made before these tables reads as empty).
"""
from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from typing import Any, Callable, Iterable, NamedTuple, Optional, Sequence, TypeVar

from pydantic import BaseModel, ValidationError

from ..records.claims import AnnotationRecord, ClaimRecord, LineageEdgeRecord
from ._outcome_rows import _dotted
from ._schema import RecordError, utc_now

__all__ = ["CLAIM_TABLES", "AnnotationRow", "ClaimRow", "ClaimTables", "LineageEdgeRow", "LineageRunRow",
           "Segmentation", "SegmentedRow"]

CLAIM_TABLES = ("claims", "skills_segmented", "annotations", "lineage_edges", "lineage_runs")
_CHUNK = 500  # ids per IN (...) query

CLAIMS_DDL = """
CREATE TABLE IF NOT EXISTS claims (
    claim_id TEXT PRIMARY KEY, skill_sha TEXT NOT NULL, idx INTEGER NOT NULL, text TEXT NOT NULL,
    start INTEGER NOT NULL, "end" INTEGER NOT NULL, section TEXT NOT NULL, UNIQUE (skill_sha, idx)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS skills_segmented (
    skill_sha TEXT PRIMARY KEY, segmenter TEXT NOT NULL, n_claims INTEGER NOT NULL, at TEXT NOT NULL
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS annotations (
    claim_id TEXT NOT NULL REFERENCES claims (claim_id), annotator TEXT NOT NULL, taxonomy TEXT NOT NULL,
    status TEXT NOT NULL, category TEXT, modality TEXT, support TEXT, support_reason TEXT NOT NULL,
    confidence REAL, reason TEXT NOT NULL, PRIMARY KEY (claim_id, annotator, taxonomy)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lineage_edges (
    chain_id TEXT NOT NULL, hop INTEGER NOT NULL, parent_id TEXT NOT NULL REFERENCES claims (claim_id),
    child_id TEXT NOT NULL REFERENCES claims (claim_id), edge TEXT NOT NULL, similarity REAL NOT NULL,
    matcher TEXT NOT NULL, PRIMARY KEY (chain_id, hop, parent_id, child_id, matcher)
) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS lineage_edges_parent ON lineage_edges (parent_id);
CREATE INDEX IF NOT EXISTS lineage_edges_child ON lineage_edges (child_id);
CREATE TABLE IF NOT EXISTS lineage_runs (
    chain_id TEXT NOT NULL, matcher TEXT NOT NULL, annotator TEXT NOT NULL, hops_done INTEGER NOT NULL,
    at TEXT NOT NULL, PRIMARY KEY (chain_id, matcher, annotator)
) STRICT, WITHOUT ROWID;
"""


# Each row type's fields are its table's columns, in order; the SQL below is built from them.
class ClaimRow(NamedTuple):
    claim_id: str
    skill_sha: str
    idx: int
    text: str
    start: int
    end: int
    section: str


class SegmentedRow(NamedTuple):
    skill_sha: str
    segmenter: str
    n_claims: int
    at: str


class AnnotationRow(NamedTuple):
    claim_id: str
    annotator: str
    taxonomy: str
    status: str
    category: Optional[str]
    modality: Optional[str]
    support: Optional[str]
    support_reason: str
    confidence: Optional[float]
    reason: str


class LineageEdgeRow(NamedTuple):
    chain_id: str
    hop: int
    parent_id: str
    child_id: str
    edge: str
    similarity: float
    matcher: str


class LineageRunRow(NamedTuple):
    chain_id: str
    matcher: str
    annotator: str
    hops_done: int
    at: str


class Segmentation(NamedTuple):
    """One SKILL.md text cut into claims (`write_segmentations`' item); `claims` may be empty."""

    skill_sha: str
    segmenter: str
    claims: Sequence[ClaimRecord]


def _columns(row: Any) -> str:
    return ", ".join(f'"{c}"' for c in row._fields)   # quoted: "end" is an SQL keyword


def _replace(table: str, row: Any) -> str:
    return f"INSERT OR REPLACE INTO {table} ({_columns(row)}) VALUES ({', '.join('?' * len(row._fields))})"


_REPLACE_CLAIM = _replace("claims", ClaimRow)
_REPLACE_SEGMENTED = _replace("skills_segmented", SegmentedRow)
_REPLACE_ANNOTATION = _replace("annotations", AnnotationRow)
_REPLACE_EDGE = _replace("lineage_edges", LineageEdgeRow)
_REPLACE_RUN = _replace("lineage_runs", LineageRunRow)
_SELECT_CLAIMS = f"SELECT {_columns(ClaimRow)} FROM claims"
_SELECT_ANNOTATIONS = f"SELECT {_columns(AnnotationRow)} FROM annotations"
_SELECT_EDGES = f"SELECT {_columns(LineageEdgeRow)} FROM lineage_edges"

_R = TypeVar("_R", bound=BaseModel)


def _validated(model: type[_R], record: Any, kind: str, keys: tuple[str, ...], position: int) -> _R:
    """`record` (a `model` or a mapping of its fields) validated strictly; a `RecordError` names the record (its
    `keys` fields, joined by '->'; its position in the batch when they are missing) and the field."""
    data = record.__dict__ if isinstance(record, BaseModel) else record
    try:
        return model.model_validate(data, strict=True)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        got = "" if first["type"] == "missing" else f", got {first['input']!r:.80}"
        more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
        ids = [data.get(k) for k in keys] if isinstance(data, dict) else [None]
        record_id = "->".join(map(str, ids)) if None not in ids else f"#{position}"
        raise RecordError(record_id, _dotted(first["loc"]) or kind, f"{first['msg']}{got}{more}",
                          kind=kind) from None


def _need(value: str, record_id: str, field: str, kind: str) -> None:
    if not value:
        raise RecordError(record_id, field, "must not be empty", kind=kind)


def _chunks(ids: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start:start + _CHUNK]


class ClaimTables:
    """The claim tables of one run store (`RunStore.claims`): reads and writes on its connection, under its lock,
    each write batch in one of its transactions (which a read-only store refuses)."""

    def __init__(self, conn: sqlite3.Connection, lock: AbstractContextManager[Any],
                 transaction: Callable[[], AbstractContextManager[None]]) -> None:
        self._conn = conn
        self._lock = lock              # the store's threading.RLock
        self._transaction = transaction
        self._claim_tables_seen = False

    def _has_claim_tables(self) -> bool:
        """False only for a store made before the claim tables, opened read-only (a writer creates them)."""
        if self._claim_tables_seen:
            return True
        with self._lock:
            found = self._conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                                       f"({', '.join('?' * len(CLAIM_TABLES))})", CLAIM_TABLES).fetchone()[0]
        self._claim_tables_seen = found == len(CLAIM_TABLES)
        return self._claim_tables_seen

    def _select_in(self, sql: str, ids: Sequence[str], params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of `sql` for `ids`, chunked: each `{0}` in it is an IN list of a chunk; `params` come first."""
        out: list[tuple[Any, ...]] = []
        for chunk in _chunks(ids):
            sql_chunk = sql.format(", ".join("?" * len(chunk)))
            out.extend(self._conn.execute(sql_chunk, (*params, *chunk * sql.count("{"))).fetchall())
        return out

    def _execute_in(self, sql: str, ids: Sequence[str]) -> None:
        for chunk in _chunks(ids):
            self._conn.execute(sql.format(", ".join("?" * len(chunk))), tuple(chunk) * sql.count("{"))

    def _missing_claims(self, ids: Iterable[str]) -> list[str]:
        wanted = sorted(set(ids))
        found = {r[0] for r in self._select_in("SELECT claim_id FROM claims WHERE claim_id IN ({})", wanted)}
        return [i for i in wanted if i not in found]

    # -- segmentation ------------------------------------------------------------------------------------------
    def write_segmentation(self, skill_sha: str, segmenter: str, claims: Sequence[ClaimRecord]) -> bool:
        """Store one SKILL.md's claims (possibly none) and mark it segmented by `segmenter`. Returns True when
        the skill's previously stored claims differed and were replaced (see the module docstring)."""
        return bool(self.write_segmentations([Segmentation(skill_sha, segmenter, claims)]))

    def write_segmentations(self, items: Sequence[Segmentation]) -> set[str]:
        """`write_segmentation` for many skills in one transaction; returns the skill_shas whose stored claims
        were replaced."""
        rows: dict[str, list[ClaimRow]] = {}
        marks: list[SegmentedRow] = []
        at = utc_now()
        owner: dict[str, str] = {}
        for skill_sha, segmenter, claims in items:
            _need(skill_sha, "?", "skill_sha", "segmentation")
            _need(segmenter, skill_sha, "segmenter", "segmentation")
            skill_rows: list[ClaimRow] = []
            ids: set[str] = set()
            for i, raw in enumerate(claims):
                claim = _validated(ClaimRecord, raw, "claim", ("claim_id",), i)
                cid = claim.claim_id
                _need(cid, f"#{i}", "claim_id", "claim")
                if claim.skill_sha != skill_sha:
                    raise RecordError(cid, "skill_sha", f"is {claim.skill_sha!r}, but the claims written are "
                                      f"those of {skill_sha!r}", kind="claim")
                if claim.index != i:
                    raise RecordError(cid, "index", f"is {claim.index} at position {i}: a skill's claims are "
                                      "written in order, indexed 0, 1, 2...", kind="claim")
                if claim.end < claim.start:
                    raise RecordError(cid, "end", f"{claim.end} is before start {claim.start}", kind="claim")
                if owner.setdefault(cid, skill_sha) != skill_sha or cid in ids:
                    raise RecordError(cid, "claim_id", "appears twice in this batch", kind="claim")
                ids.add(cid)
                skill_rows.append(ClaimRow(cid, skill_sha, i, claim.text, claim.start, claim.end, claim.section))
            if skill_sha in rows and rows[skill_sha] != skill_rows:
                raise RecordError(skill_sha, "claims", "segmented twice in this batch, differently",
                                  kind="segmentation")
            rows[skill_sha] = skill_rows
            marks.append(SegmentedRow(skill_sha, segmenter, len(skill_rows), at))
        if not marks:
            return set()
        with self._lock:
            taken = self._select_in("SELECT claim_id, skill_sha FROM claims WHERE claim_id IN ({})", list(owner))
            for cid, sha in taken:
                if sha != owner[cid]:
                    raise RecordError(cid, "claim_id", f"is already the id of a claim of skill {sha!r}",
                                      kind="claim")
            stored: dict[str, list[ClaimRow]] = {}
            for row in self._select_in(_SELECT_CLAIMS + " WHERE skill_sha IN ({}) ORDER BY skill_sha, idx",
                                       list(rows)):
                stored.setdefault(row[1], []).append(ClaimRow(*row))
            changed = {sha for sha, old in stored.items() if old != rows[sha]}
            new = [r for sha, skill_rows in rows.items() if stored.get(sha) != skill_rows for r in skill_rows]
            with self._transaction():
                self._drop_claims([r.claim_id for sha in sorted(changed) for r in stored[sha]])
                self._conn.executemany(_REPLACE_CLAIM, new)
                self._conn.executemany(_REPLACE_SEGMENTED, marks)
        return changed

    def _drop_claims(self, ids: Sequence[str]) -> None:
        """Delete claims and what was derived from them: annotations, lineage edges, the chains' lineage_runs."""
        if not ids:
            return
        chains = {r[0] for r in self._select_in(
            "SELECT DISTINCT chain_id FROM lineage_edges WHERE parent_id IN ({0}) OR child_id IN ({0})", ids)}
        self._execute_in("DELETE FROM annotations WHERE claim_id IN ({})", ids)
        self._execute_in("DELETE FROM lineage_edges WHERE parent_id IN ({0}) OR child_id IN ({0})", ids)
        self._execute_in("DELETE FROM lineage_runs WHERE chain_id IN ({})", sorted(chains))
        self._execute_in("DELETE FROM claims WHERE claim_id IN ({})", ids)

    def segmented_skills(self, segmenter: Optional[str] = None) -> set[str]:
        """The skill_shas segmented by `segmenter` (None: by any), zero-claim skills included."""
        if not self._has_claim_tables():
            return set()
        with self._lock:
            if segmenter is None:
                return {r[0] for r in self._conn.execute("SELECT skill_sha FROM skills_segmented")}
            return {r[0] for r in self._conn.execute("SELECT skill_sha FROM skills_segmented WHERE segmenter = ?",
                                                     (segmenter,))}

    def claims_of(self, skill_sha: str) -> list[ClaimRecord]:
        """The claims of one SKILL.md text, in order ([] when none, or not segmented)."""
        return self.claims_by_skill([skill_sha])[skill_sha]

    def claims_by_skill(self, skill_shas: Iterable[str]) -> dict[str, list[ClaimRecord]]:
        """skill_sha → its claims in order, for each one asked (an empty list when it has none)."""
        shas = list(dict.fromkeys(skill_shas))
        out: dict[str, list[ClaimRecord]] = {sha: [] for sha in shas}
        if not shas or not self._has_claim_tables():
            return out
        with self._lock:
            rows = self._select_in(_SELECT_CLAIMS + " WHERE skill_sha IN ({}) ORDER BY skill_sha, idx", shas)
        for cid, sha, idx, text, start, end, section in rows:
            out[sha].append(ClaimRecord(claim_id=cid, skill_sha=sha, index=idx, text=text, start=start, end=end,
                                        section=section))
        return out

    def claim_count(self) -> int:
        if not self._has_claim_tables():
            return 0
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM claims").fetchone()[0]

    # -- annotations -------------------------------------------------------------------------------------------
    def write_annotations(self, records: Sequence[AnnotationRecord]) -> None:
        """Store annotations (one transaction); each claim must be stored. Re-writing one replaces it."""
        rows: dict[tuple[str, str, str], AnnotationRow] = {}
        for i, raw in enumerate(records):
            a = _validated(AnnotationRecord, raw, "annotation", ("claim_id",), i)
            for field in ("claim_id", "annotator", "taxonomy"):
                _need(getattr(a, field), a.claim_id or f"#{i}", field, "annotation")
            if a.status == "annotated":
                for field in ("category", "modality", "support"):
                    if getattr(a, field) is None:
                        raise RecordError(a.claim_id, field, "an annotated claim needs one (a claim the annotator "
                                          "could not annotate is stored as status 'unannotated' with its reason)",
                                          kind="annotation")
            elif not a.reason:
                raise RecordError(a.claim_id, "reason", "an unannotated claim needs the reason", kind="annotation")
            row = AnnotationRow(a.claim_id, a.annotator, a.taxonomy, a.status, a.category, a.modality, a.support,
                                a.support_reason, a.confidence, a.reason)
            if rows.setdefault(row[:3], row) != row:
                raise RecordError(a.claim_id, "claim_id", f"annotated twice in this batch by {a.annotator!r} "
                                  f"({a.taxonomy}), differently", kind="annotation")
        if not rows:
            return
        with self._lock:
            missing = self._missing_claims(k[0] for k in rows)
            if missing:
                raise RecordError(missing[0], "claim_id", f"no such claim is stored ({len(missing)} of this batch "
                                  "are missing): write_segmentation first", kind="annotation")
            with self._transaction():
                self._conn.executemany(_REPLACE_ANNOTATION, list(rows.values()))

    def annotations(self, annotator: str, taxonomy: str,
                    claim_ids: Optional[Iterable[str]] = None) -> dict[str, AnnotationRecord]:
        """claim_id → what `annotator` said of it under `taxonomy` (only the claims asked for, when given)."""
        if not self._has_claim_tables():
            return {}
        where = _SELECT_ANNOTATIONS + " WHERE annotator = ? AND taxonomy = ?"
        with self._lock:
            if claim_ids is None:
                rows = self._conn.execute(where + " ORDER BY claim_id", (annotator, taxonomy)).fetchall()
            else:
                rows = self._select_in(where + " AND claim_id IN ({})", sorted(set(claim_ids)),
                                       (annotator, taxonomy))
        return {r[0]: AnnotationRecord(**AnnotationRow(*r)._asdict()) for r in rows}

    # -- lineage -----------------------------------------------------------------------------------------------
    def write_lineage(self, chain_id: str, matcher: str, annotator: str, hops_done: int,
                      edges: Sequence[LineageEdgeRecord], first_hop: Optional[int] = None) -> None:
        """Store a chain's edges from `matcher` and mark hops 1..hops_done as matched with `annotator`'s
        annotations, in one transaction. Every edge must be this chain's and matcher's, at a hop ≤ hops_done,
        between stored claims. The stored edges of this chain and matcher at hops first_hop..hops_done are
        replaced by `edges` (an edge of an earlier hop is re-written in place). first_hop defaults to the hop after
        the recorded progress (`lineage_progress`), so a chain matched again from scratch — its marker dropped
        when a claim of it was re-segmented — keeps no stale edge, and re-writing what is stored changes nothing."""
        _need(chain_id, "?", "chain_id", "lineage run")
        _need(matcher, chain_id, "matcher", "lineage run")
        _need(annotator, chain_id, "annotator", "lineage run")
        if type(hops_done) is not int or hops_done < 0:
            raise RecordError(chain_id, "hops_done", f"must be an integer ≥ 0, got {hops_done!r}",
                              kind="lineage run")
        if first_hop is not None and (type(first_hop) is not int or first_hop < 1):
            raise RecordError(chain_id, "first_hop", f"must be an integer ≥ 1, got {first_hop!r}",
                              kind="lineage run")
        rows: dict[tuple[str, str], LineageEdgeRow] = {}
        for i, raw in enumerate(edges):
            e = _validated(LineageEdgeRecord, raw, "lineage edge", ("parent_id", "child_id"), i)
            name = f"{e.parent_id}->{e.child_id}"
            for field, expected in (("chain_id", chain_id), ("matcher", matcher)):
                if getattr(e, field) != expected:
                    raise RecordError(name, field, f"is {getattr(e, field)!r}, but this write is for "
                                      f"{expected!r}", kind="lineage edge")
            if e.hop > hops_done:
                raise RecordError(name, "hop", f"{e.hop} is past hops_done {hops_done}", kind="lineage edge")
            for field in ("parent_id", "child_id"):
                _need(getattr(e, field), name, field, "lineage edge")
            # parent_id == child_id is allowed: a hop that wrote its source SKILL.md unchanged has the same claims
            # (claims are keyed by text), each copied from itself one hop earlier; the hop tells the two apart.
            row = LineageEdgeRow(e.chain_id, e.hop, e.parent_id, e.child_id, e.edge, e.similarity, e.matcher)
            if rows.setdefault((e.hop, e.parent_id, e.child_id), row) != row:
                raise RecordError(name, "edge", "appears twice in this batch, differently", kind="lineage edge")
        with self._lock:
            missing = self._missing_claims(c for key in rows for c in key[1:])
            if missing:
                raise RecordError(missing[0], "claim_id", f"no such claim is stored ({len(missing)} claims of "
                                  "this batch's edges are missing): write_segmentation first", kind="lineage edge")
            if first_hop is None:
                done = self._conn.execute("SELECT hops_done FROM lineage_runs WHERE chain_id = ? AND matcher = ? "
                                          "AND annotator = ?", (chain_id, matcher, annotator)).fetchone()
                first_hop = 1 if done is None else done[0] + 1
            with self._transaction():
                self._conn.execute("DELETE FROM lineage_edges WHERE chain_id = ? AND matcher = ? AND hop BETWEEN ? "
                                   "AND ?", (chain_id, matcher, first_hop, hops_done))
                self._conn.executemany(_REPLACE_EDGE, list(rows.values()))
                self._conn.execute(_REPLACE_RUN, LineageRunRow(chain_id, matcher, annotator, hops_done, utc_now()))

    def lineage_edges(self, chain_id: Optional[str] = None, matcher: Optional[str] = None) -> list[LineageEdgeRecord]:
        """Stored edges (of one chain and/or matcher when given), by chain, matcher, hop, child, parent."""
        if not self._has_claim_tables():
            return []
        conditions = [(c, v) for c, v in (("chain_id", chain_id), ("matcher", matcher)) if v is not None]
        where = " WHERE " + " AND ".join(f"{c} = ?" for c, _ in conditions) if conditions else ""
        with self._lock:
            rows = self._conn.execute(_SELECT_EDGES + where + " ORDER BY chain_id, matcher, hop, child_id, "
                                      "parent_id", tuple(v for _, v in conditions)).fetchall()
        return [LineageEdgeRecord(**LineageEdgeRow(*r)._asdict()) for r in rows]

    def lineage_progress(self, matcher: str, annotator: str) -> dict[str, int]:
        """chain_id → hops already matched by `matcher` with `annotator`'s annotations."""
        if not self._has_claim_tables():
            return {}
        with self._lock:
            return dict(self._conn.execute("SELECT chain_id, hops_done FROM lineage_runs WHERE matcher = ? AND "
                                           "annotator = ?", (matcher, annotator)).fetchall())

