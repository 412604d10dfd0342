"""The lineage pipeline over a run store: segment every stored SKILL.md, annotate its claims, match each chain hop
to the hop before, and store claims, annotations and edges (tables `claims`, `annotations`, `lineage_edges`).

Incremental: a SKILL.md already segmented by this segmenter is not cut again, a claim already annotated by this
annotator under this taxonomy is not annotated again, and a chain is matched only from the hop after the one its
progress marker records — rerunning after a campaign grew does only the new work.

Ground truth never reaches the pipeline: HTML comments (where synthetic mode keeps its answers) are blanked by the
segmenter before anything is read, so a claim's text, annotation and edges are the same with and without them.
Where a hop is scheduled is `mkb_ray.campaign.plan`; this module only reads what hops wrote.
"""
from __future__ import annotations

import json
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol, Sequence

from ..claims.embeddings import SentenceEncoder, shared_encoder
from ..claims.segment import SEGMENTER_VERSION, segment, sentence_ids
from ..claims.support import evidence_from_record
from ..claims.taxonomy import Taxonomy
from ..records import AttemptRecord, chain_id_of
from ..records.claims import AnnotationRecord, ClaimRecord, EvidenceItem
from ..store import RunStore, TrialRow
from ..store.claims_tables import Segmentation
from .match import DEFAULT_THRESHOLD, MATCHER_VERSION, MatchClaim, match_hops

log = logging.getLogger(__name__)
_BATCH = 500   # SKILL.md files per store transaction


class Annotator(Protocol):
    name: str

    def annotate(self, claims: Sequence[ClaimRecord], evidence: Sequence[EvidenceItem]) -> list[AnnotationRecord]:
        ...


@dataclass(frozen=True, slots=True)
class ChainHop:
    chain_id: str
    hop: int
    trial: TrialRow


@dataclass
class LineageSummary:
    """What one run of the pipeline did and found."""

    skills_segmented: int = 0
    claims_new: int = 0
    claims_annotated: int = 0
    unannotated: int = 0
    chains_matched: int = 0
    edges_new: int = 0
    matcher: str = ""
    annotator: str = ""
    taxonomy: str = ""
    chains: dict[str, int] = field(default_factory=dict)   # chain id -> hops with a SKILL.md


Progress = Callable[[str, int, int], None]   # (stage, done, total)


def chain_hops(rows: Sequence[TrialRow], only: Optional[str] = None) -> dict[str, list[ChainHop]]:
    """The chains of a run: hop trials grouped by chain id ('<model>/<problem>/chain<c>'), hops in order, only
    done hops that wrote a SKILL.md; `only` keeps one chain (its id, or a unique suffix of it)."""
    chains: dict[str, list[ChainHop]] = defaultdict(list)
    for row in rows:
        if row.kind != "chain_hop" or row.chain is None or row.hop is None or not row.done or not row.skill_sha:
            continue
        cid = chain_id_of(row.model, row.problem_id, row.chain)
        chains[cid].append(ChainHop(cid, row.hop, row))
    if only is not None:
        keep = [c for c in chains if c == only or c.endswith(only)]
        if len(keep) != 1:
            raise ValueError(f"--chain {only!r} matches {len(keep)} chains (known: {', '.join(sorted(chains)[:5])}"
                             f"{' ...' if len(chains) > 5 else ''})")
        chains = {keep[0]: chains[keep[0]]}
    return {c: sorted(hops, key=lambda h: h.hop) for c, hops in sorted(chains.items())}


def trial_evidence(store: RunStore, trial_id: str) -> list[EvidenceItem]:
    """The evidence items of a trial's stored record ([] when it has none or it cannot be read, with a warning)."""
    text = store.record_json(trial_id)
    if not text:
        return []
    try:
        return evidence_from_record(AttemptRecord.model_validate(json.loads(text)))
    except (ValueError, TypeError) as error:
        log.warning("trial %s: record unreadable for support (%s); its claims get no evidence", trial_id, error)
        return []


class LineagePipeline:
    """Segment → annotate → match over one run store (see the module docstring)."""

    def __init__(self, store: RunStore, annotator: Annotator, taxonomy: Taxonomy,
                 encoder: Optional[SentenceEncoder] = None, threshold: float = DEFAULT_THRESHOLD,
                 progress: Optional[Progress] = None) -> None:
        self.store = store
        self.annotator = annotator
        self.taxonomy = taxonomy
        # One encoder (one model load, one cache) for annotator and matcher when the annotator has one.
        self.encoder = encoder or getattr(annotator, "encoder", None) or shared_encoder()
        self.threshold = threshold
        # Edge types depend on the annotator's modalities, so the matcher's name carries the annotator.
        self.matcher = f"{MATCHER_VERSION}@{threshold:.2f}+{annotator.name}"
        self.progress = progress or (lambda stage, done, total: None)

    def run(self, only_chain: Optional[str] = None) -> LineageSummary:
        summary = LineageSummary(matcher=self.matcher, annotator=self.annotator.name, taxonomy=self.taxonomy.ref)
        rows = list(self.store.trial_rows())
        chains = chain_hops(rows, only_chain)
        summary.chains = {c: len(h) for c, h in chains.items()}
        if only_chain is not None:
            rows = [h.trial for hops in chains.values() for h in hops]
        first_trial: dict[str, str] = {}
        for row in rows:
            if row.done and row.skill_sha:
                first_trial.setdefault(row.skill_sha, row.trial_id)
        self._segment(first_trial, summary)
        self._annotate(first_trial, summary)
        self._match(chains, summary)
        return summary

    def _segment(self, first_trial: dict[str, str], summary: LineageSummary) -> None:
        done = self.store.claims.segmented_skills(SEGMENTER_VERSION)
        todo = [sha for sha in first_trial if sha not in done]
        for start in range(0, len(todo), _BATCH):
            batch = []
            for sha in todo[start:start + _BATCH]:
                text = self.store.skill_text_of(sha)
                if text is None:
                    log.warning("SKILL.md %s (trial %s) is missing from the artifacts; skipped", sha[:12],
                                first_trial[sha])
                    continue
                claims = segment(text)
                batch.append(Segmentation(sha, SEGMENTER_VERSION, claims))
                summary.claims_new += len(claims)
            self.store.claims.write_segmentations(batch)
            summary.skills_segmented += len(batch)
            self.progress("segment", min(start + _BATCH, len(todo)), len(todo))

    def _annotate(self, first_trial: dict[str, str], summary: LineageSummary) -> None:
        shas = list(first_trial)
        for start in range(0, len(shas), _BATCH):
            part = shas[start:start + _BATCH]
            by_skill = self.store.claims.claims_by_skill(part)
            ids = [c.claim_id for claims in by_skill.values() for c in claims]
            have = self.store.claims.annotations(self.annotator.name, self.taxonomy.ref, ids)
            records: list[AnnotationRecord] = []
            # Embed the whole batch at once (full, length-sorted model batches); the per-skill calls below then
            # read the encoder's cache, and so does the matcher.
            self.encoder.encode([c.text for claims in by_skill.values() for c in claims if c.claim_id not in have])
            for sha in part:
                claims = [c for c in by_skill.get(sha, []) if c.claim_id not in have]
                if not claims:
                    continue
                records += self.annotator.annotate(claims, trial_evidence(self.store, first_trial[sha]))
            self.store.claims.write_annotations(records)
            summary.claims_annotated += len(records)
            summary.unannotated += sum(r.status != "annotated" for r in records)
            self.progress("annotate", min(start + _BATCH, len(shas)), len(shas))

    def _match(self, chains: dict[str, list[ChainHop]], summary: LineageSummary) -> None:
        progress = self.store.claims.lineage_progress(self.matcher, self.annotator.name)
        for n, (chain_id, hops) in enumerate(chains.items(), 1):
            done_to = progress.get(chain_id, 0)
            last = hops[-1].hop if hops else 0
            if last <= done_to:
                self.progress("match", n, len(chains))
                continue
            by_skill = self.store.claims.claims_by_skill({h.trial.skill_sha for h in hops})  # type: ignore[misc]
            ids = [c.claim_id for claims in by_skill.values() for c in claims]
            modality = {cid: a.modality for cid, a in
                        self.store.claims.annotations(self.annotator.name, self.taxonomy.ref, ids).items()}
            edges = []
            previous = None
            for hop in hops:
                claims = by_skill.get(hop.trial.skill_sha or "", [])
                sentences = sentence_ids(self.store.skill_text_of(hop.trial.skill_sha or "") or "", claims)
                match = [MatchClaim(c.claim_id, c.text, modality.get(c.claim_id), sentence)
                         for c, sentence in zip(claims, sentences)]
                if hop.hop > done_to and previous is not None and previous[0] == hop.hop - 1:
                    vectors = self.encoder.encode([c.text for c in claims])
                    found = match_hops(chain_id, hop.hop, previous[1], match, previous[2], vectors,
                                       threshold=self.threshold)
                    edges += [e.model_copy(update={"matcher": self.matcher}) for e in found]
                    previous = (hop.hop, match, vectors)
                else:
                    previous = (hop.hop, match, self.encoder.encode([c.text for c in claims]))
            self.store.claims.write_lineage(chain_id, self.matcher, self.annotator.name, last, edges,
                                            first_hop=done_to + 1)
            summary.edges_new += len(edges)
            summary.chains_matched += 1
            self.progress("match", n, len(chains))
