"""Claim matching between consecutive hops: which claim at hop k-1 each claim at hop k came from, and how.

The matcher sees only texts and the annotator's modality (never synthetic ground truth):

1. a child whose normalised text equals a parent's is `copied` from it;
2. otherwise its parent is the most similar parent claim if that similarity reaches `threshold` (calibrated on
   the gold lineage set), else the child is born at hop k. Similarity is the cosine of MiniLM vectors *centred* on
   the mean vector of the two hops' claims: every claim of a SKILL.md names the same operation, DSL and GPU, and
   that shared part made unrelated claims look alike (raw cosine: a claim born at hop k found a wrong parent
   above the threshold about one time in four on stripped synthetic chains). A parent that a child already
   copies verbatim is taken by another child only at `carried_threshold` (a claim is rarely copied and
   paraphrased at one hop, while a new claim next to a copied one often resembles it), and a parent whose own
   most similar child is another one only at `one_sided_threshold` (the match is not mutual);
3. a child that also resembles a second parent (≥ `merge_threshold`) which no other child took is `merged` from
   both; a parent that two or more non-copied children took as their best match, each shorter than it, is `split`;
4. a single-parent edge is `contradicted` when exactly one side carries a negation and the two share at least half
   their words (a polarity flip, not a rewording), otherwise
   `strengthened` / `weakened` when the modality moved (hedged < plain < absolute), else `paraphrased`.
A parent claim no child matched is lost at hop k.
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..records.claims import MODALITIES, EdgeType, LineageEdgeRecord

MATCHER_VERSION = "match-v2"
# Centred-cosine cuts, chosen on the gold lineage set (tests/gold/lineage: edge P 0.829 / R 0.775, where match-v1's
# raw cosine at 0.62 gave 0.811 / 0.709) and on stripped synthetic chains (docs/metrics.md, "Validation").
DEFAULT_THRESHOLD = 0.40
DEFAULT_MERGE_THRESHOLD = 0.55
DEFAULT_CARRIED_THRESHOLD = 0.75
DEFAULT_ONE_SIDED_THRESHOLD = 0.60
CENTRING_PRIOR = 2
# A contradiction keeps most of the words and flips the polarity; a paraphrase that happens to say "not" does not.
CONTRADICTION_OVERLAP = 0.5
_MODALITY_RANK = {m: i for i, m in enumerate(MODALITIES)}
_NEGATION = re.compile(r"\b(not|no|never|cannot|can't|won't|isn't|doesn't|don't|didn't|nothing|none|without|"
                       r"impossible|neither|nor|fails?)\b", re.IGNORECASE)
_NON_WORD = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True, slots=True)
class MatchClaim:
    """What the matcher needs of a claim."""

    claim_id: str
    text: str
    modality: Optional[str] = None


def normalise(text: str) -> str:
    return _NON_WORD.sub(" ", text.lower()).strip()


def _negations(text: str) -> int:
    return len(_NEGATION.findall(text))


def _word_overlap(a: str, b: str) -> float:
    """Jaccard overlap of the two texts' word sets."""
    wa, wb = set(normalise(a).split()), set(normalise(b).split())
    return len(wa & wb) / len(wa | wb) if wa | wb else 0.0


def edge_type(parent: MatchClaim, child: MatchClaim) -> EdgeType:
    """The type of a one-parent edge (see the module docstring, rule 4)."""
    if normalise(parent.text) == normalise(child.text):
        return "copied"
    if (_negations(parent.text) == 0) != (_negations(child.text) == 0) and \
            _word_overlap(parent.text, child.text) >= CONTRADICTION_OVERLAP:
        return "contradicted"
    p, c = _MODALITY_RANK.get(parent.modality or ""), _MODALITY_RANK.get(child.modality or "")
    if p is not None and c is not None and p != c:
        return "strengthened" if c > p else "weakened"
    return "paraphrased"


def centred_similarity(child_vectors: np.ndarray, parent_vectors: np.ndarray) -> np.ndarray:
    """Cosine similarity (children × parents) after subtracting the mean of all the vectors of both hops, shrunk
    by n / (n + CENTRING_PRIOR): with a handful of claims the mean is mostly the claims themselves, and removing
    all of it would push two lone claims apart (one child and one parent would always score -1)."""
    stacked = np.concatenate([child_vectors, parent_vectors])
    mean = stacked.mean(axis=0) * (len(stacked) / (len(stacked) + CENTRING_PRIOR))
    c, p = child_vectors - mean, parent_vectors - mean
    c = c / np.maximum(np.linalg.norm(c, axis=1, keepdims=True), 1e-12)
    p = p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-12)
    return c @ p.T


def match_hops(chain_id: str, hop: int, parents: Sequence[MatchClaim], children: Sequence[MatchClaim],
               parent_vectors: np.ndarray, child_vectors: np.ndarray, threshold: float = DEFAULT_THRESHOLD,
               merge_threshold: float = DEFAULT_MERGE_THRESHOLD,
               carried_threshold: float = DEFAULT_CARRIED_THRESHOLD,
               one_sided_threshold: float = DEFAULT_ONE_SIDED_THRESHOLD) -> list[LineageEdgeRecord]:
    """The lineage edges from hop-1's claims (`parents`) to hop's (`children`), vectors row-aligned with them
    (unit length, as SentenceEncoder gives them)."""
    if not parents or not children:
        return []
    matcher = f"{MATCHER_VERSION}@{threshold:.2f}"
    sims = centred_similarity(child_vectors, parent_vectors)
    # Identical texts are common among short clauses ("so trying is pointless"): each copy takes its own parent
    # of that text, in order, so that a repeated clause is not counted as one copy and one loss.
    by_text: dict[str, list[int]] = defaultdict(list)
    for j, p in enumerate(parents):
        by_text[normalise(p.text)].append(j)
    best: dict[int, int] = {}
    copied: set[int] = set()
    for i, child in enumerate(children):
        same = by_text.get(normalise(child.text))
        if same:
            best[i] = same.pop(0) if len(same) > 1 else same[0]
            copied.add(i)
    carried = set(best.values())
    for i in range(len(children)):
        if i in copied:
            continue
        j = int(np.argmax(sims[i]))
        if j in carried:
            bar = carried_threshold
        else:
            bar = threshold if int(np.argmax(sims[:, j])) == i else one_sided_threshold
        if sims[i, j] >= bar:
            best[i] = j
    taken = defaultdict(list)
    for i, j in best.items():
        taken[j].append(i)
    edges: list[LineageEdgeRecord] = []

    def add(j: int, i: int, kind: EdgeType) -> None:
        edges.append(LineageEdgeRecord(chain_id=chain_id, hop=hop, parent_id=parents[j].claim_id,
                                       child_id=children[i].claim_id, edge=kind,
                                       similarity=float(max(-1.0, min(1.0, sims[i, j]))), matcher=matcher))

    merged: set[int] = set()
    for i, j in sorted(best.items()):
        if i in copied:
            continue
        order = np.argsort(-sims[i])
        second = next((int(k) for k in order if int(k) != j), None)
        if second is not None and sims[i, second] >= merge_threshold and not taken.get(second) \
                and len(children[i].text) > 0.9 * max(len(parents[j].text), len(parents[second].text)):
            add(j, i, "merged")
            add(second, i, "merged")
            taken[second].append(i)
            merged.add(i)
    for j, kids in taken.items():
        free = [i for i in kids if i not in copied and i not in merged]
        is_split = len(free) >= 2 and all(len(children[i].text) < len(parents[j].text) for i in free)
        for i in kids:
            if i in merged:
                continue
            kind = "copied" if i in copied else ("split" if is_split and i in free else
                                                 edge_type(parents[j], children[i]))
            add(j, i, kind)
    return edges


def calibrate_threshold(positive: Sequence[float], negative: Sequence[float]) -> float:
    """The similarity cut that best separates true parent pairs (`positive`) from a child's best wrong parent
    (`negative`), by F1 of the positives; used on the gold lineage set."""
    candidates = sorted(set(round(x, 3) for x in [*positive, *negative]))
    best_t, best_f1 = DEFAULT_THRESHOLD, -1.0
    for t in candidates:
        tp = sum(x >= t for x in positive)
        fp = sum(x >= t for x in negative)
        fn = len(positive) - tp
        f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        if f1 > best_f1:
            best_t, best_f1 = t, f1
    return best_t
