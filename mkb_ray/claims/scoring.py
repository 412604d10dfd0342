"""Scoring against the hand-labelled gold sets: segmentation precision/recall, per-category precision/recall of an
annotator, accuracy of modality and support, and Cohen's κ between two annotators.

Predicted claims are aligned to gold claims by character overlap: a gold claim is found when some predicted claim
covers at least half of it and is not more than twice its length beyond it (IoU ≥ 0.5 would punish a segmenter
for keeping a leading "so"); each gold claim is scored with the label of the predicted claim that overlaps it most.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Optional, Sequence

from ..records.claims import AnnotationRecord, ClaimRecord
from .gold import GoldSkill

MIN_COVER = 0.5


@dataclass(frozen=True, slots=True)
class AlignedClaim:
    """One gold claim and the predicted claim that best covers it (None when segmentation missed it)."""

    gold_quote: str
    gold_category: str
    gold_modality: str
    gold_support: str
    predicted: Optional[ClaimRecord]


@dataclass(frozen=True, slots=True)
class SegmentationScore:
    gold: int
    predicted: int
    found: int           # gold claims covered by a predicted claim
    matched: int         # predicted claims that cover some gold claim

    @property
    def recall(self) -> float:
        return self.found / self.gold if self.gold else 0.0

    @property
    def precision(self) -> float:
        return self.matched / self.predicted if self.predicted else 0.0


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def align(gold: GoldSkill, predicted: Sequence[ClaimRecord]) -> tuple[list[AlignedClaim], SegmentationScore]:
    """Each gold claim with its best-covering predicted claim, and the segmentation score of the file."""
    aligned: list[AlignedClaim] = []
    used: set[str] = set()
    search_from = 0
    for claim in gold.claims:
        start = gold.skill.find(claim.quote, search_from)
        if start < 0:  # quotes are validated to occur; out of order ones are searched from the top
            start = gold.skill.find(claim.quote)
        else:
            search_from = start
        span = (start, start + len(claim.quote))
        best, best_overlap = None, 0
        for p in predicted:
            ov = _overlap(span, (p.start, p.end))
            if ov > best_overlap:
                best, best_overlap = p, ov
        covered = best is not None and best_overlap >= MIN_COVER * len(claim.quote) and \
            (best.end - best.start) <= 2 * len(claim.quote) + 40
        if covered:
            used.add(best.claim_id)  # type: ignore[union-attr]
        aligned.append(AlignedClaim(claim.quote, claim.category, claim.modality, claim.support,
                                    best if covered else None))
    return aligned, SegmentationScore(gold=len(gold.claims), predicted=len(predicted),
                                      found=sum(a.predicted is not None for a in aligned), matched=len(used))


@dataclass(frozen=True, slots=True)
class LabelScore:
    """How one annotator's labels agree with the gold labels on the aligned claims."""

    n: int
    category_accuracy: float
    modality_accuracy: float
    support_accuracy: float
    per_category: dict[str, tuple[float, float, int]]   # category -> (precision, recall, gold count)
    unannotated: int
    # category -> (true positives, claims the annotator labelled with it): the counts behind precision and recall,
    # which a prevalence correction needs (analysis/annotator_correction.py)
    counts: dict[str, tuple[int, int]] = field(default_factory=dict)


def paired(aligned: Sequence[AlignedClaim], annotations: Sequence[AnnotationRecord]
           ) -> list[tuple[AlignedClaim, Optional[AnnotationRecord]]]:
    """Each aligned gold claim with the annotation of the predicted claim covering it (None when no predicted claim
    covers it or the annotator returned nothing for that claim): the pairs `score_labels` scores."""
    by_id = {a.claim_id: a for a in annotations}
    return [(a, by_id.get(a.predicted.claim_id) if a.predicted else None) for a in aligned]


def score_labels(pairs: Sequence[tuple[AlignedClaim, Optional[AnnotationRecord]]]) -> LabelScore:
    """Scores over gold claims that segmentation found; a missed or unannotated claim counts as wrong."""
    n = len(pairs)
    right = Counter[str]()
    predicted_as = Counter[str]()
    true_pos = Counter[str]()
    gold_count = Counter(a.gold_category for a, _ in pairs)
    unannotated = 0
    for gold, ann in pairs:
        if ann is None or ann.status != "annotated":
            unannotated += ann is not None
            continue
        predicted_as[ann.category or ""] += 1
        if ann.category == gold.gold_category:
            right["category"] += 1
            true_pos[gold.gold_category] += 1
        right["modality"] += ann.modality == gold.gold_modality
        right["support"] += ann.support == gold.gold_support
    per_category = {c: (true_pos[c] / predicted_as[c] if predicted_as[c] else 0.0,
                        true_pos[c] / gold_count[c] if gold_count[c] else 0.0, gold_count[c])
                    for c in sorted(gold_count)}
    return LabelScore(n=n, category_accuracy=right["category"] / n if n else 0.0,
                      modality_accuracy=right["modality"] / n if n else 0.0,
                      support_accuracy=right["support"] / n if n else 0.0,
                      per_category=per_category, unannotated=unannotated,
                      counts={c: (true_pos[c], predicted_as[c]) for c in sorted(gold_count)})


def cohens_kappa(a: Sequence[Optional[str]], b: Sequence[Optional[str]]) -> float:
    """Cohen's κ of two label sequences over the same items (None is a label of its own: 'no answer')."""
    if len(a) != len(b) or not a:
        raise ValueError("cohens_kappa needs two label sequences of the same, non-zero length")
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b)) / n
    count_a, count_b = Counter(a), Counter(b)
    expected = sum(count_a[k] * count_b[k] for k in set(count_a) | set(count_b)) / (n * n)
    return 1.0 if expected == 1.0 else (observed - expected) / (1.0 - expected)
