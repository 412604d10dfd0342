"""The offline annotator for the embedded default: rules plus the local MiniLM embedding model, no LLM.

- **Modality** from a lexicon: a hedge (may, probably, seems, I think, …) makes a claim `hedged` even when it also
  says "cannot" ("probably cannot be parallelised" is a guess); a universal or categorical word (always, never,
  cannot, must, the only, no point, …) makes it `absolute`; else `plain`.
- **Category**: each category's score is the claim's cosine similarity to the taxonomy's own definition and
  examples (so a user's taxonomy file changes it) plus cue rules for the mkb-11 categories — numbers with x/ms for
  performance evidence, failure words for diagnoses, "cannot … keep eager" for closures, imperative checks for
  recipes, API names for DSL details. Cue rules only add to categories the taxonomy has.
- **Support** from the attempt's verdicts (`support.judge_support`), never from the text's confidence.
"""
from __future__ import annotations

import re
from typing import Optional, Sequence

import numpy as np

from ..records.claims import AnnotationRecord, ClaimRecord, EvidenceItem, Modality
from .embeddings import SentenceEncoder, shared_encoder
from .support import judge_support
from .taxonomy import Taxonomy

OFFLINE_VERSION = "offline-v1"

_HEDGE = re.compile(
    r"\b(may|might|maybe|perhaps|possibly|probably|likely|unlikely|seems?|seemed|appears?|appeared|apparently|"
    r"i think|i suspect|i believe|i guess|not sure|unsure|unclear|presumably|could|should be (around|about|close)|"
    r"suggests?|roughly as a guess|as far as i can tell|if i remember|worth (trying|testing|checking))\b",
    re.IGNORECASE)
_ABSOLUTE = re.compile(
    r"\b(always|never|cannot|can't|can not|must|impossible|the only|only way|no way|every|all of|none of|"
    r"no point|guarantee[sd]?|under no|at all|dead end|useless|pointless|nothing (else|left)|do not (even )?try|"
    r"don't (even )?try|never try|in every case|without exception|is not possible|not possible|unavoidable|"
    r"is the minimum|has to be|have to be|need(s)? to be)\b", re.IGNORECASE)

# Cue rules: (category, bonus, pattern). Bonuses are in units of cosine similarity.
_CUES: tuple[tuple[str, float, re.Pattern[str]], ...] = (
    ("performance_evidence", 0.30, re.compile(
        r"\d(\.\d+)?\s*(x|×)\b|\d\s*(ms|us|µs)\b|\b(speedup|faster|slower|kernel time|ran at|measured|"
        r"TB/s|GB/s|over eager)\b", re.IGNORECASE)),
    ("bounded_failure_diagnosis", 0.30, re.compile(
        r"\b(failed|fails|failure|error|crash(ed)?|segfault|timed out|timeout|wrong|mismatch|did not compile|"
        r"didn't compile|rejected|NaN|overflow(ed)?|off by one|off-by-one|deadlock|hung)\b", re.IGNORECASE)),
    ("unsupported_closure", 0.40, re.compile(
        r"\b(cannot|can't|can not|not possible|impossible|no point|pointless|not worth|dead end|give up|"
        r"wasted effort|do not (bother|try|swap|use|attempt)|don't (bother|try|swap|use)|"
        r"keep the (eager|sequential|step-by-step)|leave it to (eager|torch)|no way to|is the minimum|"
        r"nothing (left )?to gain|as fast as it gets|unavoidable|(will|can|would) never|makes no difference|"
        r"no (benefit|gain)|already fast enough|not help|won't help|never (helps|pays|works|reach\w*))\b",
        re.IGNORECASE)),
    ("verification_recipe", 0.30, re.compile(
        r"^(always )?(test|check|compare|verify|validate|run|assert|print|diff|try a ragged|before (submitting|"
        r"timing))\b|\b(before submitting|against the (fp64|float64|reference)|sanity check|unit test)\b",
        re.IGNORECASE)),
    ("open_question", 0.35, re.compile(
        r"\?|\b(unknown|untested|not tried|never tried|did not try|didn't try|worth trying|next time|open question|"
        r"still open|to be seen|remains to|whether|i ran out of time|not yet|next attempt should|left for)\b",
        re.IGNORECASE)),
    ("dsl_specific_detail", 0.25, re.compile(
        r"`[^`]*\b(T|cute|cutlass|tvm|tir|tirx)\.[^`]*`|\b(from_dlpack|prim_func|Constexpr|cute\.jit|"
        r"cute\.kernel|tvm\.compile|T\.[a-z_]+|cute\.[a-z_]+|TIRx|CuTe DSL|MLIR|the DSL|DSL)\b")),
    ("hardware_mapping", 0.20, re.compile(
        r"\b(CTA|CTAs|warp|warps|lane|lanes|thread|threads|block|blocks|grid|shared memory|smem|registers?|"
        r"occupancy|SMs?|vectori[sz]ed|128-bit|16-byte|coalesc\w*|TMA|tensor cores?)\b", re.IGNORECASE)),
    ("workload_census", 0.20, re.compile(
        r"\b(\d+\s*(MB|GB|KB|bytes)|memory-bound|bandwidth-bound|compute-bound|arithmetic intensity|dominat\w*|"
        r"shape|shapes|elements|tokens|rows|FLOPs?)\b", re.IGNORECASE)),
    ("verified_reformulation", 0.25, re.compile(
        r"\b(passed|passes|within tolerance|correct on|matched|fixed it|bit-exact)\b", re.IGNORECASE)),
    ("unverified_reformulation", 0.25, re.compile(
        r"\b(could be (fused|merged|folded|split|rewritten|reordered|combined)|ought to|should (also )?work|"
        r"would (save|work|remove|avoid)|not tested|untested|in principle|can be (fused|merged|folded|split|"
        r"rewritten|reordered|combined))\b", re.IGNORECASE)),
    ("unsupported_claim", 0.10, re.compile(
        r"\b(always|never|in general|generally|every GPU|on this GPU|is faster than|costs? about)\b",
        re.IGNORECASE)),
)


def modality_of(text: str) -> Modality:
    if _HEDGE.search(text):
        return "hedged"
    if _ABSOLUTE.search(text):
        return "absolute"
    return "plain"


class OfflineAnnotator:
    """Category by embedding similarity plus cue rules, modality by lexicon, support from the record."""

    def __init__(self, taxonomy: Taxonomy, encoder: Optional[SentenceEncoder] = None) -> None:
        self.taxonomy = taxonomy
        self.encoder = encoder or shared_encoder()
        self.name = OFFLINE_VERSION
        self._prototypes: Optional[list[np.ndarray]] = None
        # The cue rules that fire on a text, as (category index, bonus), by text: a claim copied verbatim along a
        # chain comes back at every hop, and the rules' regexes cost more than its cached embedding.
        self._cues: dict[str, tuple[tuple[int, float], ...]] = {}

    def _category_prototypes(self) -> list[np.ndarray]:
        if self._prototypes is None:
            self._prototypes = [self.encoder.encode([c.definition, *c.examples]) for c in self.taxonomy.categories]
        return self._prototypes

    def categories(self, texts: Sequence[str],
                   supports: Optional[Sequence[Optional[str]]] = None) -> list[tuple[str, float]]:
        """(category, confidence) per text: the best-scoring category and its margin over the runner-up.
        `supports` (what the attempt's verdicts say of each text) is not used by the rules; a subclass may."""
        if not texts:
            return []
        vectors = self.encoder.encode(list(texts))
        prototypes = self._category_prototypes()
        # Similarity to a category: its best example, with the definition as one more (weaker) example.
        sims = np.stack([np.maximum((vectors @ p[1:].T).max(axis=1), 0.8 * (vectors @ p[0])) for p in prototypes],
                        axis=1)
        names = self.taxonomy.names
        out = []
        for row, text in zip(sims, texts):
            scores = row.copy()
            for i, bonus in self._cue_bonuses(text):
                scores[i] += bonus
            order = np.argsort(-scores)
            margin = float(scores[order[0]] - scores[order[1]]) if len(order) > 1 else 1.0
            out.append((names[int(order[0])], max(0.0, min(1.0, margin * 4))))
        return out

    def _cue_bonuses(self, text: str) -> tuple[tuple[int, float], ...]:
        """The cue rules that fire on `text` and are among the taxonomy's categories: (category index, bonus)."""
        if text not in self._cues:
            index = {n: i for i, n in enumerate(self.taxonomy.names)}
            self._cues[text] = tuple((index[category], bonus) for category, bonus, pattern in _CUES
                                     if category in index and pattern.search(text))
        return self._cues[text]

    def annotate(self, claims: Sequence[ClaimRecord], evidence: Sequence[EvidenceItem]) -> list[AnnotationRecord]:
        """One annotation per claim, in order."""
        judged = [judge_support(claim.text, evidence) for claim in claims]
        labelled = self.categories([c.text for c in claims], [j.support for j in judged])
        return [AnnotationRecord(claim_id=claim.claim_id, annotator=self.name, taxonomy=self.taxonomy.ref,
                                 category=category, modality=modality_of(claim.text), support=j.support,
                                 support_reason=j.reason, confidence=confidence)
                for claim, j, (category, confidence) in zip(claims, judged, labelled)]
