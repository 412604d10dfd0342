"""Claim matching between consecutive hops: which claim at hop k-1 each claim at hop k came from, and how.

The matcher sees only texts and the annotator's modality (never synthetic ground truth):

1. a child whose normalised text equals a parent's is `copied` from it; so is a child that says a parent's words
   behind other framing: the two end in the same run of words, which covers at least FRAMED_COPY_SHARE of the
   shorter one, and what differs in front is a short lead-in or a table cell ("Keep in mind that <claim>", "3 |
   <claim>"). Writers add and drop such framing between hops without touching the claim;
2. otherwise children and the parents no child copies pair up greedily, most similar pair first, one child per
   parent, where the similarity reaches `threshold` (calibrated on the gold lineage set); a child left over takes its
   most similar parent only at `one_sided_threshold`, else it is born at hop k. Similarity is the cosine of MiniLM
   vectors *centred* on the mean vector of the two hops' claims: every claim of a SKILL.md names the same operation,
   DSL and GPU, and that shared part made unrelated claims look alike (raw cosine: a claim born at hop k found a
   wrong parent above the threshold about one time in four on stripped synthetic chains). A parent that a child
   already copies verbatim is taken by another child only at `carried_threshold` (a claim is rarely copied and
   paraphrased at one hop, while a new claim next to a copied one often resembles it);
3. a child that also resembles a second parent (≥ `merge_threshold`) which no other child took is `merged` from
   both; a parent that two or more non-copied children took as their best match, each shorter than it, is `split`;
4. a single-parent edge is `contradicted` when exactly one side carries a negation and the two share at least half
   their words (a polarity flip, not a rewording; where the modality moved, "never", "nothing", "none" and
   "without" are the absolute form's words and do not count), otherwise
   `strengthened` / `weakened` when the modality moved (hedged < plain < absolute), else `paraphrased`.
5. a parent piece left unmatched whose sentence has a matched piece lives on in that sentence: it is linked to the
   most similar piece of the child sentence its sibling matched, at SIBLING_PARENT_THRESHOLD or above. A writer who
   rewords a sentence keeps what its clauses say; the clause structure of the rewording need not match the
   original's. (Not the other way: a child piece left unmatched is a new assertion joined to an old sentence more
   often than a reworded clause, see SIBLING_PARENT_THRESHOLD.)
A parent claim no child matched is lost at hop k.
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..records.claims import MODALITIES, EdgeType, LineageEdgeRecord

# v3: framed copies, greedy pairing, pieces sharing their sentence's fate (rules 1, 2, 5); v4: rule 5 for parent
# pieces only.
MATCHER_VERSION = "match-v4"
# Centred-cosine cuts, chosen on the gold lineage set (tests/gold/lineage: edge P 0.829 / R 0.775, where match-v1's
# raw cosine at 0.62 gave 0.811 / 0.709) and on stripped synthetic chains (docs/metrics.md, "Validation").
DEFAULT_THRESHOLD = 0.40
DEFAULT_MERGE_THRESHOLD = 0.55
DEFAULT_CARRIED_THRESHOLD = 0.75
DEFAULT_ONE_SIDED_THRESHOLD = 0.60
CENTRING_PRIOR = 2
# A framed copy: the shared ending covers this share of the shorter text, is at least FRAMED_COPY_MIN_WORDS long,
# and leaves at most FRAMED_COPY_MAX_LEAD words in front of it on either side.
FRAMED_COPY_SHARE = 0.75
FRAMED_COPY_MIN_WORDS = 5
FRAMED_COPY_MAX_LEAD = 9
# A parent piece whose sentence lives on stays with it: the clause a writer drops from a sentence they keep
# ("..., and there never will be" gone when the claim is weakened) changed the claim more often than it ended one.
# (0.15 chosen on the tuning seeds: pooled over seeds 0-3, closure survival at 2 / 5 / 10 hops -4.2 / -4.9 / +2.5
# points vs -8.1 / -10.4 / -2.1 at 0.2; -1 kept every dropped clause alive, +9 to +21.)
# match-v3 also linked an unmatched child piece to a parent piece of its sentence's match (at 0.2); match-v4 does
# not. On the hand-labelled gold chains those links were 2 right of 12 (edge precision 0.766 -> 0.789, recall
# 0.766 -> 0.759); on synthetic chains 536 of 755 sub-0.4 links of one tuning run joined pieces of different true
# claims, and a closure lineage reaching one rode on its neighbour's. Pooled over tuning seeds 0-7, closure survival
# at 2 / 5 / 10 hops -3.8 / -3.3 / +5.2 points from the truth -> -2.6 / -2.1 / +3.2, reinforced -1.5 -> -0.2.
SIBLING_PARENT_THRESHOLD = 0.15
# A contradiction keeps most of the words and flips the polarity; a paraphrase that happens to say "not" does not.
CONTRADICTION_OVERLAP = 0.5
_MODALITY_RANK = {m: i for i, m in enumerate(MODALITIES)}
_NEGATION = re.compile(r"\b(not|no|never|cannot|can't|won't|isn't|doesn't|don't|didn't|nothing|none|without|"
                       r"impossible|neither|nor|fails?)\b", re.IGNORECASE)
# Without the words that also make a claim absolute ("never", "without exception", "nothing else"): a claim that
# moved up in modality flips polarity only by these.
_POLARITY = re.compile(r"\b(not|no|cannot|can't|won't|isn't|doesn't|don't|didn't|impossible|neither|nor|fails?)\b",
                       re.IGNORECASE)
_NON_WORD = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True, slots=True)
class MatchClaim:
    """What the matcher needs of a claim."""

    claim_id: str
    text: str
    modality: Optional[str] = None
    sentence: int = -1     # pieces cut from one sentence share it (segment.sentence_ids); -1: unknown


def normalise(text: str) -> str:
    return _NON_WORD.sub(" ", text.lower()).strip()


def shared_ending(a: Sequence[str], b: Sequence[str]) -> int:
    """How many words the two word lists have in common at their ends."""
    n = 0
    for x, y in zip(reversed(a), reversed(b)):
        if x != y:
            break
        n += 1
    return n


def framed_copy(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether two normalised word lists say the same words behind different framing (rule 1)."""
    common = shared_ending(a, b)
    return (common >= FRAMED_COPY_MIN_WORDS and common >= FRAMED_COPY_SHARE * min(len(a), len(b))
            and max(len(a), len(b)) - common <= FRAMED_COPY_MAX_LEAD)


def _negated(text: str, pattern: re.Pattern[str] = _NEGATION) -> bool:
    return pattern.search(text) is not None


def _word_overlap(a: str, b: str) -> float:
    """Jaccard overlap of the two texts' word sets."""
    wa, wb = set(normalise(a).split()), set(normalise(b).split())
    return len(wa & wb) / len(wa | wb) if wa | wb else 0.0


def edge_type(parent: MatchClaim, child: MatchClaim) -> EdgeType:
    """The type of a one-parent edge (see the module docstring, rule 4)."""
    if normalise(parent.text) == normalise(child.text):
        return "copied"
    p, c = _MODALITY_RANK.get(parent.modality or ""), _MODALITY_RANK.get(child.modality or "")
    polarity = _NEGATION if p == c else _POLARITY
    if _negated(parent.text, polarity) != _negated(child.text, polarity) and \
            _word_overlap(parent.text, child.text) >= CONTRADICTION_OVERLAP:
        return "contradicted"
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
    _framed_copies(parents, children, best, copied, carried)
    # The rest pair up greedily, most similar first, among the parents no child copies: one child per parent.
    free_parents = [j for j in range(len(parents)) if j not in carried]
    pairs = sorted(((float(sims[i, j]), i, j) for i in range(len(children)) if i not in copied
                    for j in free_parents if sims[i, j] >= threshold), reverse=True)
    paired: set[int] = set()
    for _, i, j in pairs:
        if i not in best and j not in paired:
            best[i] = j
            paired.add(j)
    # A child left over attaches to its most similar parent only at the higher bars (a piece of a split parent).
    for i in range(len(children)):
        if i in best:
            continue
        j = int(np.argmax(sims[i]))
        if sims[i, j] >= (carried_threshold if j in carried else one_sided_threshold):
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
    for j, i in _sibling_links(parents, children, sims, _pairs(edges, parents, children)):
        add(j, i, edge_type(parents[j], children[i]))
    return edges


def _pairs(edges: Sequence[LineageEdgeRecord], parents: Sequence[MatchClaim], children: Sequence[MatchClaim]
           ) -> list[tuple[int, int]]:
    pos_p = {c.claim_id: k for k, c in enumerate(parents)}
    pos_c = {c.claim_id: k for k, c in enumerate(children)}
    return [(pos_p[e.parent_id], pos_c[e.child_id]) for e in edges]


def _by_sentence(claims: Sequence[MatchClaim]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = defaultdict(list)
    for k, c in enumerate(claims):
        if c.sentence >= 0:
            out[c.sentence].append(k)
    return out


def _attach(side: Sequence[MatchClaim], other: Sequence[MatchClaim], sims: np.ndarray,
            links: Sequence[tuple[int, int]], bar: float) -> list[tuple[int, int]]:
    """For each piece of `side` (rows of `sims`) that is in no link, whose sentence has a linked piece: the
    most similar piece of the `other` sentences those links reach, at `bar` or above."""
    reach: dict[int, set[int]] = defaultdict(set)   # a sentence of `side` -> sentences of `other` it links to
    for a, b in links:
        if side[a].sentence >= 0 and other[b].sentence >= 0:
            reach[side[a].sentence].add(other[b].sentence)
    other_sentences = _by_sentence(other)
    linked = {a for a, _ in links}
    out = []
    for a, claim in enumerate(side):
        candidates = [b for s in reach.get(claim.sentence, ()) for b in other_sentences[s]]
        if a in linked or claim.sentence < 0 or not candidates:
            continue
        b = max(candidates, key=lambda k: sims[a, k])
        if sims[a, b] >= bar:
            out.append((a, b))
    return out


def _sibling_links(parents: Sequence[MatchClaim], children: Sequence[MatchClaim], sims: np.ndarray,
                   linked: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Rule 5: (parent, child) links for parent pieces left unmatched in a sentence that has a matched piece."""
    return _attach(parents, children, sims.T, linked, SIBLING_PARENT_THRESHOLD)


def _framed_copies(parents: Sequence[MatchClaim], children: Sequence[MatchClaim], best: dict[int, int],
                   copied: set[int], carried: set[int]) -> None:
    """Rule 1's framed copies, for children not copied verbatim and parents no child copies verbatim: each child
    takes the free parent with the longest shared ending (candidates found by their last FRAMED_COPY_MIN_WORDS
    words); `best`, `copied` and `carried` are updated in place."""
    tail = FRAMED_COPY_MIN_WORDS
    words = [normalise(p.text).split() for p in parents]
    by_tail: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for j, w in enumerate(words):
        if j not in carried and len(w) >= tail:
            by_tail[tuple(w[-tail:])].append(j)
    for i, child in enumerate(children):
        if i in copied:
            continue
        c = normalise(child.text).split()
        fits = [j for j in by_tail.get(tuple(c[-tail:]), ()) if j not in carried and framed_copy(words[j], c)]
        if fits:
            j = max(fits, key=lambda k: shared_ending(words[k], c))
            best[i] = j
            copied.add(i)
            carried.add(j)


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
