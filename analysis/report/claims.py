"""The claims the drill-down pages show: which annotator, taxonomy and matcher the store holds (and so which the
report uses), every stored SKILL.md's claims with their annotation, and the lineage edges between chain hops.

Read with three plain queries over the claim tables — one join of claims with their annotations, one of the edges
— rather than `claims_by_skill` / `annotations` / `lineage_edges`, which build a pydantic record per row: a
chain-100 store holds ~600,000 claims and ~500,000 edges, and the records would cost more than the whole report.
Rows are kept as the tuples SQLite returns; a page turns its own few dozen into `ClaimMark`s and `Link`s.
"""
from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass, field
from typing import NamedTuple, Optional

from ...claims.offline import OFFLINE_VERSION
from ...store import RunStore
from .trials import TrialIndex

log = logging.getLogger(__name__)

DEFAULT_ANNOTATOR = OFFLINE_VERSION
DEFAULT_TAXONOMY = "mkb-11@1"


class ClaimMark(NamedTuple):
    """One claim as a SKILL.md page highlights it: its span in the text and its annotation (None: none)."""

    claim_id: str
    start: int
    end: int
    category: Optional[str]
    modality: Optional[str]
    support: Optional[str]


class Link(NamedTuple):
    """A lineage edge seen from one end: the claim at the other end, its trial (None: not in the run), the type."""

    trial_id: Optional[str]
    claim_id: str
    edge: str


ClaimRow = tuple[str, int, int, Optional[str], Optional[str], Optional[str], Optional[str]]
# claim_id, start, end, annotation status, category, modality, support
EdgeRow = tuple[str, str, str]      # parent_id, child_id, edge


@dataclass
class ClaimData:
    """What the report knows about claims: the labels used (None: the store holds no annotations), the taxonomy's
    categories (plus any other category stored), each SKILL.md's claim rows and the edges per (chain, hop)."""

    annotator: Optional[str] = None
    taxonomy: Optional[str] = None
    matcher: Optional[str] = None
    categories: list[str] = field(default_factory=list)
    closure: Optional[str] = None
    rows: dict[str, list[ClaimRow]] = field(default_factory=dict)             # skill sha -> claims in order
    edges: dict[tuple[str, int], list[EdgeRow]] = field(default_factory=dict)  # (chain, child hop) -> edges

    @property
    def labels(self) -> str:
        return f"{self.annotator} / {self.taxonomy}" if self.annotator else "none"

    def marks(self, skill_sha: Optional[str]) -> list[ClaimMark]:
        """A SKILL.md's claims with their annotation ('annotated' ones only carry a category)."""
        out = []
        for cid, start, end, status, category, modality, support in self.rows.get(skill_sha or "", ()):
            ok = status == "annotated"
            out.append(ClaimMark(cid, start, end, category if ok else None, modality if ok else None,
                                 support if ok else None))
        return out

    def links(self, trials: TrialIndex, trial_id: str) -> tuple[dict[str, list[Link]], dict[str, list[Link]]]:
        """For a chain hop's claims: claim id -> its parents (on the previous hop) and -> its children (on the
        next hop); two empty maps for any other trial."""
        where = trials.hop_of.get(trial_id)
        parents: dict[str, list[Link]] = {}
        children: dict[str, list[Link]] = {}
        if where is None:
            return parents, children
        chain, hop = where
        before, after = trials.hop_trial.get((chain, hop - 1)), trials.hop_trial.get((chain, hop + 1))
        for parent_id, child_id, edge in self.edges.get((chain, hop), ()):
            parents.setdefault(child_id, []).append(Link(before, parent_id, edge))
        for parent_id, child_id, edge in self.edges.get((chain, hop + 1), ()):
            children.setdefault(parent_id, []).append(Link(after, child_id, edge))
        return parents, children


def query_claim_tables(store: RunStore, sql: str, params: tuple = ()) -> list[tuple]:
    """Rows of a query on the claim tables; none from a store made before them (opened read-only, it cannot be
    given them), so the report and its summary read old runs without a special case."""
    try:
        return store.connection.execute(sql, params).fetchall()
    except sqlite3.OperationalError:   # a store made before the claim tables, opened read-only
        return []


def stored_labels(store: RunStore, annotator: Optional[str] = None, taxonomy: Optional[str] = None
                  ) -> tuple[Optional[str], Optional[str]]:
    """The (annotator, taxonomy) to report: the ones asked for (the stored pair that matches them), else
    offline-v1 / mkb-11@1 when stored, else the pair with the most annotations; (None, None) when none is stored."""
    pairs = {(a, t): n for a, t, n in query_claim_tables(store, "SELECT annotator, taxonomy, COUNT(*) FROM annotations "
                                                    "GROUP BY annotator, taxonomy")}
    if annotator or taxonomy:
        wanted = [p for p in pairs if annotator in (None, p[0]) and taxonomy in (None, p[1])]
        if wanted:
            return max(wanted, key=lambda p: (pairs[p], p))
        return annotator or DEFAULT_ANNOTATOR, taxonomy or DEFAULT_TAXONOMY
    if (DEFAULT_ANNOTATOR, DEFAULT_TAXONOMY) in pairs:
        return DEFAULT_ANNOTATOR, DEFAULT_TAXONOMY
    if pairs:
        return max(pairs, key=lambda p: (pairs[p], p))
    return None, None


def stored_matcher(store: RunStore, annotator: Optional[str], matcher: Optional[str] = None) -> Optional[str]:
    """The matcher whose edges to report: the one asked for, else the one `mkb lineage` ran with this annotator
    (lineage_runs), else the one with the most edges; None when no edges are stored."""
    if matcher:
        return matcher
    counts = dict(query_claim_tables(store, "SELECT matcher, COUNT(*) FROM lineage_edges GROUP BY matcher"))
    if not counts:
        return None
    runs = query_claim_tables(store, "SELECT DISTINCT matcher, annotator FROM lineage_runs")
    ran = {m for m, a in runs if a == annotator}
    pool = [m for m in counts if m in ran] or list(counts)
    return max(pool, key=lambda m: (counts[m], m))


def _taxonomy_names(ref: Optional[str]) -> tuple[list[str], Optional[str]]:
    """Category names and closure category of a stored taxonomy ref (`name@version`); ([], None) if unknown."""
    if not ref:
        return [], None
    from ...claims.taxonomy import TaxonomyError, load_taxonomy

    try:
        tax = load_taxonomy(ref.split("@")[0])
    except TaxonomyError:
        return [], None
    if tax.ref != ref:
        log.warning("the store's taxonomy is %s, the file on disk is %s: categories taken from the file", ref, tax.ref)
    return list(tax.names), tax.closure_category


_CLAIMS_SQL = ('SELECT c.skill_sha, c.claim_id, c.start, c."end", a.status, a.category, a.modality, a.support '
               "FROM claims c LEFT JOIN annotations a ON a.claim_id = c.claim_id AND a.annotator = ? "
               "AND a.taxonomy = ? ORDER BY c.skill_sha, c.idx")
_CATEGORIES_SQL = ("SELECT DISTINCT category FROM annotations WHERE annotator = ? AND taxonomy = ? AND "
                   "status = 'annotated' AND category IS NOT NULL")
_EDGES_SQL = "SELECT chain_id, hop, parent_id, child_id, edge FROM lineage_edges WHERE matcher = ?"


def load_claims(store: RunStore, trials: TrialIndex, annotator: Optional[str] = None,
                taxonomy: Optional[str] = None, matcher: Optional[str] = None) -> ClaimData:
    """Every stored SKILL.md's claims with the chosen annotations, and the chosen matcher's edges."""
    annotator, taxonomy = stored_labels(store, annotator, taxonomy)
    labelled = annotator is not None and bool(query_claim_tables(
        store, "SELECT 1 FROM annotations WHERE annotator = ? AND taxonomy = ? LIMIT 1", (annotator, taxonomy)))
    rows: dict[str, list[ClaimRow]] = {}
    for r in query_claim_tables(store, _CLAIMS_SQL, (annotator, taxonomy)):
        rows.setdefault(r[0], []).append(r[1:])
    categories, closure = _taxonomy_names(taxonomy if labelled else None)
    if labelled:
        seen = {r[0] for r in query_claim_tables(store, _CATEGORIES_SQL, (annotator, taxonomy))}
        categories += sorted(seen - set(categories))
    data = ClaimData(annotator if labelled else None, taxonomy if labelled else None,
                     stored_matcher(store, annotator, matcher) if labelled else None, categories, closure, rows)
    if data.matcher:
        edges: dict[tuple[str, int], list[EdgeRow]] = {}
        for r in query_claim_tables(store, _EDGES_SQL, (data.matcher,)):
            edges.setdefault((r[0], r[1]), []).append(r[2:])
        data.edges = edges
    return data
