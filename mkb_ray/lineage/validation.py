"""Validation without circularity: lineage recovered from *stripped* synthetic chains vs the generator's truth.

`synthetic_chain` draws a chain of synthetic SKILL.md texts (ground truth in HTML comments). `recovered_rates`
runs the pipeline on `strip_ground_truth(text)` only — segmentation, modality, embeddings and the matcher — and
counts what each parent claim became at the next hop; `planted_rates` counts the same from the comments. The two
must agree within 5 points for the pipeline's lineage metrics to be trusted (tests/test_lineage.py).

Scoring unit. A synthetic claim is one sentence of the generator's, often with two or three clauses that the
segmenter rightly cuts into separate claims. To compare like with like, the scorer (not the pipeline) groups the
segmenter's pieces by the generator sentence they lie in and gives each sentence the strongest change among its
pieces (contradicted > split > merged > strengthened > weakened > paraphrased > copied; dropped only when every
piece was dropped). The pipeline's edges are computed before, and without, this grouping.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

import numpy as np

from ..analysis.propagation import ClaimNode
from ..claims.embeddings import SentenceEncoder, shared_encoder
from ..claims.offline import OfflineAnnotator, modality_of
from ..claims.segment import segment
from ..records.claims import MODALITIES, LineageEdgeRecord
from ..synthetic import ClaimContext, SyntheticClaim, SyntheticSpec, evolve, fresh_claims, parse_skill, render_skill
from ..synthetic import strip_ground_truth
from .match import DEFAULT_THRESHOLD, MatchClaim, match_hops

# What a parent claim can become at the next hop (each parent is counted once; see `transition_of`).
TRANSITIONS = ("dropped", "copied", "paraphrased", "strengthened", "weakened", "contradicted", "merged", "split")


@dataclass(frozen=True, slots=True)
class TransitionRates:
    parents: int
    counts: dict[str, int]
    new_per_hop: float

    def rate(self, name: str) -> float:
        return self.counts.get(name, 0) / self.parents if self.parents else 0.0


_STRENGTH = ("contradicted", "split", "merged", "strengthened", "weakened", "paraphrased", "copied")


def strongest(transitions: Sequence[str]) -> str:
    """The transition of a sentence from its pieces' transitions (see the module docstring)."""
    kept = [t for t in transitions if t != "dropped"]
    if not kept:
        return "dropped"
    return min(kept, key=lambda t: _STRENGTH.index(t) if t in _STRENGTH else len(_STRENGTH))


def transition_of(kinds: Sequence[str]) -> str:
    """A parent's transition from the types of its outgoing edges: none → dropped; a split or merge wins;
    otherwise the first edge's type."""
    if not kinds:
        return "dropped"
    for special in ("split", "merged"):
        if special in kinds:
            return special
    return kinds[0]


def synthetic_chain(spec: SyntheticSpec, hops: int, seed: int, problem_id: str = "mlp_norm/01_fused_add_rmsnorm"
                    ) -> list[str]:
    """hops + 1 SKILL.md texts (hop 0 fresh, each next one evolved from it), ground truth included."""
    rng = random.Random(seed)
    dsls = ("cutedsl", "tirx")
    claims = fresh_claims(spec, rng, ClaimContext(f"s{seed}h0", problem_id, dsls[0]))
    texts = [render_skill(claims, rng=rng)]
    for hop in range(1, hops + 1):
        claims = evolve(claims, spec, rng, ClaimContext(f"s{seed}h{hop}", problem_id, dsls[hop % 2]))
        texts.append(render_skill(claims, rng=rng))
    return texts


def planted_rates(texts: Sequence[str]) -> TransitionRates:
    """Transition counts from the ground-truth comments (what the generator did)."""
    counts: Counter[str] = Counter()
    parents = new = 0
    for before, after in zip(texts, texts[1:]):
        parent_claims = parse_skill(before)
        children = parse_skill(after)
        out: dict[str, list[str]] = {c.claim_id: [] for c in parent_claims}
        for child in children:
            if not child.parent_ids:
                new += 1
            for pid in child.parent_ids:
                out.setdefault(pid, []).append(child.edge)
        parents += len(parent_claims)
        counts.update(transition_of(kinds) for kinds in out.values())
    return TransitionRates(parents, dict(counts), new / max(1, len(texts) - 1))


def _sentence_of(stripped: str, sentences: Sequence[str], start: int) -> int:
    """Index of the generator sentence containing offset `start` of the stripped text (-1: none, boilerplate)."""
    position = 0
    for i, sentence in enumerate(sentences):
        at = stripped.find(sentence, position)
        if at < 0:
            continue
        if at <= start < at + len(sentence):
            return i
        position = at
    return -1


@dataclass(frozen=True)
class _Hop:
    """One hop as the pipeline sees it (match claims, their vectors, the offline category of each) plus, for
    scoring only, the generator sentence each claim lies in and the generator's claims."""

    match: list[MatchClaim]
    vectors: np.ndarray
    categories: list[str]
    unit: dict[str, int]
    truth: list[SyntheticClaim]


def _pipeline_hops(texts: Sequence[str], encoder: SentenceEncoder, annotator: Optional[OfflineAnnotator]
                   ) -> Iterator[_Hop]:
    stripped_texts = [strip_ground_truth(text) for text in texts]
    segmented = [segment(stripped) for stripped in stripped_texts]   # the pipeline: no comments read until scoring
    # Embed the whole chain at once (full, length-sorted model batches, as LineagePipeline does); the per-hop calls
    # below then read the encoder's cache.
    encoder.encode([c.text for claims in segmented for c in claims])
    for text, stripped, claims in zip(texts, stripped_texts, segmented):
        match = [MatchClaim(c.claim_id, c.text, modality_of(c.text)) for c in claims]
        vectors = encoder.encode([c.text for c in claims])
        categories = [c for c, _ in annotator.categories([c.text for c in claims])] if annotator else []
        truth = parse_skill(text)                                               # scoring only
        sentences = [c.text for c in truth]
        yield _Hop(match, vectors, categories, {c.claim_id: _sentence_of(stripped, sentences, c.start)
                                                for c in claims}, truth)


def recovered_rates(texts: Sequence[str], encoder: Optional[SentenceEncoder] = None,
                    threshold: float = DEFAULT_THRESHOLD) -> tuple[TransitionRates, list[LineageEdgeRecord]]:
    """Transition counts of the pipeline run on the stripped texts alone, scored per generator sentence, and the
    edges it found."""
    encoder = encoder or shared_encoder()
    counts: Counter[str] = Counter()
    parents = new = 0
    edges_all: list[LineageEdgeRecord] = []
    previous: Optional[_Hop] = None
    for hop, now in enumerate(_pipeline_hops(texts, encoder, None)):
        if previous is not None:
            edges = match_hops("synthetic", hop, previous.match, now.match, previous.vectors, now.vectors,
                               threshold=threshold)
            edges_all.extend(edges)
            out: dict[str, list[str]] = {c.claim_id: [] for c in previous.match}
            for e in edges:
                out[e.parent_id].append(e.edge)
            per_sentence: dict[int, list[str]] = {}
            for claim_id, kinds in out.items():
                per_sentence.setdefault(previous.unit[claim_id], []).append(transition_of(kinds))
            per_sentence.pop(-1, None)
            parents += len(per_sentence)
            counts.update(strongest(ts) for ts in per_sentence.values())
            born = {now.unit[c.claim_id] for c in now.match} - {now.unit[e.child_id] for e in edges} - {-1}
            new += len(born)
        previous = now
    return TransitionRates(parents, dict(counts), new / max(1, len(texts) - 1)), edges_all


# ------------------------------------------------------------------------------- graphs for the propagation metrics
# Unsupported by construction: a synthetic chain has no attempt records, so the pipeline's support is `unsupported`
# for every claim (no evidence), and so is the truth's.
_SUPPORT = "unsupported"


def truth_graph(texts: Sequence[str], chain_id: str) -> tuple[list[ClaimNode], list[LineageEdgeRecord]]:
    """The generator's own claim graph, read from the ground-truth comments: one node per generator sentence."""
    nodes, edges = [], []
    for hop, text in enumerate(texts):
        for c in parse_skill(text):
            nodes.append(ClaimNode(chain_id, hop, c.claim_id, c.category, c.modality, _SUPPORT))
            edges.extend(LineageEdgeRecord(chain_id=chain_id, hop=hop, parent_id=p, child_id=c.claim_id,
                                           edge=c.edge, similarity=1.0, matcher="ground-truth")
                         for p in c.parent_ids)
    return nodes, edges


def recovered_graph(texts: Sequence[str], chain_id: str, annotator: OfflineAnnotator,
                    encoder: Optional[SentenceEncoder] = None, truth_categories: bool = False
                    ) -> tuple[list[ClaimNode], list[LineageEdgeRecord]]:
    """The pipeline's claim graph of the stripped texts (offline categories and modalities, matcher edges),
    regrouped for scoring into one node per generator sentence, as `recovered_rates` scores transitions: a
    sentence's category is the most common among its pieces (ties: the first piece's), its modality the strongest,
    and sentence A at hop k-1 is a parent of sentence B at hop k when a piece of A is a parent of a piece of B (the
    edge type: the strongest of those piece edges). `truth_categories` puts the generator's categories on the
    recovered nodes instead, which isolates what the matcher does to a metric from what the annotator does."""
    encoder = encoder or annotator.encoder
    nodes: list[ClaimNode] = []
    edges: list[LineageEdgeRecord] = []
    previous: Optional[_Hop] = None
    for hop, now in enumerate(_pipeline_hops(texts, encoder, annotator)):
        pieces: dict[int, list[tuple[str, str]]] = {}
        for claim, category in zip(now.match, now.categories):
            pieces.setdefault(now.unit[claim.claim_id], []).append((category, claim.modality or "plain"))
        pieces.pop(-1, None)
        for u, labels in sorted(pieces.items()):
            category = (now.truth[u].category if truth_categories
                        else Counter(c for c, _ in labels).most_common(1)[0][0])
            modality = max((m for _, m in labels), key=MODALITIES.index)
            nodes.append(ClaimNode(chain_id, hop, f"s{u}", category, modality, _SUPPORT))
        if previous is not None:
            by_pair: dict[tuple[int, int], list[str]] = {}
            for e in match_hops(chain_id, hop, previous.match, now.match, previous.vectors, now.vectors):
                pair = (previous.unit[e.parent_id], now.unit[e.child_id])
                if -1 not in pair:
                    by_pair.setdefault(pair, []).append(e.edge)
            edges.extend(LineageEdgeRecord(chain_id=chain_id, hop=hop, parent_id=f"s{a}", child_id=f"s{b}",
                                           edge=strongest(kinds), similarity=1.0, matcher="grouped")
                         for (a, b), kinds in sorted(by_pair.items()))
        previous = now
    return nodes, edges
