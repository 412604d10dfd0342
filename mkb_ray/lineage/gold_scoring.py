"""The matcher scored on the hand-labelled gold chains (tests/gold/lineage): each hop's text is segmented, predicted
claims are mapped to the gold claim they overlap most, and predicted edges are compared with the labelled ones."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..claims.embeddings import SentenceEncoder, shared_encoder
from ..claims.gold import load_gold_chains
from ..claims.offline import modality_of
from ..claims.segment import segment, sentence_ids
from .match import DEFAULT_THRESHOLD, MatchClaim, match_hops


@dataclass(frozen=True)
class MatcherScore:
    gold_edges: int
    predicted_edges: int
    true_edges: int
    type_confusion: dict[tuple[str, str], int]    # (gold type, predicted type) over true edges

    @property
    def precision(self) -> float:
        return self.true_edges / self.predicted_edges if self.predicted_edges else 0.0

    @property
    def recall(self) -> float:
        return self.true_edges / self.gold_edges if self.gold_edges else 0.0

    @property
    def type_accuracy(self) -> float:
        total = sum(self.type_confusion.values())
        return sum(n for (g, p), n in self.type_confusion.items() if g == p) / total if total else 0.0


def score_matcher(directory: Path, encoder: Optional[SentenceEncoder] = None,
                  threshold: float = DEFAULT_THRESHOLD) -> MatcherScore:
    encoder = encoder or shared_encoder()
    predicted: dict[tuple[str, str, str], str] = {}
    gold: dict[tuple[str, str, str], str] = {}
    for _, chain in load_gold_chains(directory):
        previous = None
        for hop in chain.hops:
            claims = segment(hop.skill)
            spans = [(c.id, hop.skill.find(c.quote), hop.skill.find(c.quote) + len(c.quote)) for c in hop.claims]
            to_gold: dict[str, Optional[str]] = {}
            for claim in claims:
                overlap, gid = max(((min(b, claim.end) - max(a, claim.start), g) for g, a, b in spans),
                                   default=(0, None))
                to_gold[claim.claim_id] = gid if overlap > 0 else None
            # As `mkb lineage` builds them (pipeline.py), sentence ids included: rule 5 links pieces by sentence.
            sentences = sentence_ids(hop.skill, claims)
            match = [MatchClaim(c.claim_id, c.text, modality_of(c.text), sentence)
                     for c, sentence in zip(claims, sentences)]
            vectors = encoder.encode([c.text for c in claims])
            if previous is not None:
                for e in match_hops(chain.chain, hop.hop, previous[0], match, previous[1], vectors,
                                    threshold=threshold):
                    parent, child = previous[2][e.parent_id], to_gold[e.child_id]
                    if parent is not None and child is not None:
                        predicted.setdefault((chain.chain, parent, child), e.edge)
                for c in hop.claims:
                    for p in c.parents:
                        gold[(chain.chain, p, c.id)] = c.edge or ""
            previous = (match, vectors, to_gold)
    true = set(predicted) & set(gold)
    confusion = Counter((gold[k], predicted[k]) for k in true)
    return MatcherScore(len(gold), len(predicted), len(true), dict(confusion))
