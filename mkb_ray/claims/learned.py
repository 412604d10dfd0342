"""The learned offline annotator: a linear classifier over the local MiniLM embedding and the cue rules, fitted to
the hand-labelled dev split. No LLM, no network; the fitted weights ship in `learned_annotator.json`.

Why: the rule annotator (`offline.py`, offline-v1) scores each category by similarity to the taxonomy's own
examples plus hand-set cue bonuses. Its rules were written looking at the dev split and fall apart on the test
split (category accuracy 0.49, `unsupported_closure` recall 0.21: benchmarks/results/2026-12-04-cpu-gold-scores.txt).
Here the same signals — the embedding, each cue rule firing or not, the hedge and absolute lexicons — plus hashed
words and word pairs and the support the verdicts give the claim are weighed by a multinomial logistic regression
fitted to every labelled claim of the dev split, so how much a cue counts is measured, not guessed.

`fit(...)` is deterministic (full-batch gradient descent from zeros, a fixed number of steps), so
`scripts/fit_learned_annotator.py` re-derives the shipped weights from the files it names, and a test checks that
they are what those files give. Modality and support are the rule annotator's (lexicons, the attempt's verdicts).
The test split is never read here; `mkb gold --annotator learned` scores it.
"""
from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ..records.claims import SUPPORTS
from .embeddings import SentenceEncoder
from .offline import _ABSOLUTE, _CUES, _HEDGE, OfflineAnnotator
from .taxonomy import Taxonomy

LEARNED_VERSION = "learned-v2"   # v2: fitted to 32 dev files (d01-d08, e01-e08 added), closure by argmax
WEIGHTS = Path(__file__).with_name("learned_annotator.json")


class LearnedWeightsError(ValueError):
    """The weights file is missing, malformed or for another taxonomy; the message names the file and the field."""


def features(texts: Sequence[str], encoder: SentenceEncoder,
             supports: Optional[Sequence[Optional[str]]] = None) -> np.ndarray:
    """(n, 384 + NGRAM_BUCKETS + cues + 6): the unit embedding, hashed words and word pairs, one 0/1 column per cue
    rule, hedge, absolute, the support the attempt's verdicts give the claim (`support.judge_support`; one-hot, all 0
    when unknown), and a bias of 1 (last).
    Support is there because the taxonomy splits on it: a closure the verdicts back is evidence, not a closure."""
    if not texts:
        return np.zeros((0, 0), dtype=np.float64)
    vectors = encoder.encode(list(texts)).astype(np.float64)
    supports = supports if supports is not None else [None] * len(texts)
    words = np.array([_hashed_ngrams(text) for text in texts])
    flags = np.array([[1.0 if pattern.search(text) else 0.0 for _, _, pattern in _CUES]
                      + [1.0 if _HEDGE.search(text) else 0.0, 1.0 if _ABSOLUTE.search(text) else 0.0]
                      + [1.0 if support == value else 0.0 for value in SUPPORTS] + [1.0]
                      for text, support in zip(texts, supports)])
    return np.hstack([vectors, words, flags])


NGRAM_BUCKETS = 1024
NGRAM_SCALE = 0.25  # each present word or word pair adds this much (the embedding's entries are ~0.05)
_WORD = re.compile(r"[a-z0-9_]+")


def _hashed_ngrams(text: str) -> list[float]:
    """Words and adjacent word pairs, lower-cased, hashed (crc32: the same in every process) into NGRAM_BUCKETS."""
    tokens = _WORD.findall(text.lower())
    row = [0.0] * NGRAM_BUCKETS
    for gram in tokens + [f"{a} {b}" for a, b in zip(tokens, tokens[1:])]:
        row[zlib.crc32(gram.encode()) % NGRAM_BUCKETS] = NGRAM_SCALE
    return row


@dataclass(frozen=True)
class FitSettings:
    l2: float = 1e-3  # on the weights, not the bias
    steps: int = 1500
    learning_rate: float = 2.0
    class_weight_power: float = 0.5  # each class weighted by (n / n_class) ** power: rare categories count more
    # The closure category wins whenever its probability reaches this (0: only as the most probable category).
    closure_threshold: float = 0.0


def fit(x: np.ndarray, labels: Sequence[int], classes: int, settings: FitSettings = FitSettings()) -> np.ndarray:
    """Weights (classes, features) of a multinomial logistic regression, class-weighted, L2-regularised."""
    y = np.zeros((len(labels), classes))
    y[np.arange(len(labels)), list(labels)] = 1.0
    counts = np.maximum(y.sum(axis=0), 1.0)
    sample_weight = ((len(labels) / counts) ** settings.class_weight_power)[list(labels)]
    sample_weight = sample_weight / sample_weight.sum()
    weights = np.zeros((classes, x.shape[1]))
    penalty = np.ones(x.shape[1])
    penalty[-1] = 0.0  # the bias column is not regularised
    for _ in range(settings.steps):
        probabilities = softmax(x @ weights.T)
        gradient = ((probabilities - y) * sample_weight[:, None]).T @ x + settings.l2 * weights * penalty
        weights -= settings.learning_rate * gradient
    return weights


def softmax(scores: np.ndarray) -> np.ndarray:
    shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


@dataclass(frozen=True)
class LearnedWeights:
    taxonomy: str  # Taxonomy.ref it was fitted for
    classes: tuple[str, ...]
    weights: np.ndarray
    trained_on: tuple[str, ...]
    settings: FitSettings

    def as_json(self) -> dict:
        return {"version": LEARNED_VERSION, "taxonomy": self.taxonomy, "classes": list(self.classes),
                "trained_on": list(self.trained_on), "settings": vars(self.settings),
                "weights": [[round(float(v), 6) for v in row] for row in self.weights]}


def load_weights(path: Path = WEIGHTS) -> LearnedWeights:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise LearnedWeightsError(f"{path}: cannot be read as JSON ({err}); refit with "
                                  "scripts/fit_learned_annotator.py") from err
    try:
        weights = np.array(data["weights"], dtype=np.float64)
        classes = tuple(str(c) for c in data["classes"])
        settings = FitSettings(**data["settings"])
        loaded = LearnedWeights(str(data["taxonomy"]), classes, weights, tuple(data["trained_on"]), settings)
    except (KeyError, TypeError, ValueError) as err:
        raise LearnedWeightsError(f"{path}: field {err} is missing or malformed") from err
    if weights.ndim != 2 or weights.shape[0] != len(classes):
        raise LearnedWeightsError(f"{path}: weights: {weights.shape} for {len(classes)} classes")
    return loaded


class LearnedAnnotator(OfflineAnnotator):
    """Category by the fitted classifier (`categories`); modality, support and the records as the rule annotator
    makes them (`OfflineAnnotator.annotate`, which hands each claim's judged support to `categories`)."""

    def __init__(self, taxonomy: Taxonomy, encoder: Optional[SentenceEncoder] = None,
                 weights: Optional[LearnedWeights] = None) -> None:
        super().__init__(taxonomy, encoder)
        self.fitted = weights or load_weights()
        if self.fitted.taxonomy != taxonomy.ref or set(self.fitted.classes) != set(taxonomy.names):
            raise LearnedWeightsError(f"{WEIGHTS}: taxonomy: fitted for {self.fitted.taxonomy} "
                                      f"({len(self.fitted.classes)} classes), not {taxonomy.ref}")
        self.name = LEARNED_VERSION

    def categories(self, texts: Sequence[str],
                   supports: Optional[Sequence[Optional[str]]] = None) -> list[tuple[str, float]]:
        """(category, confidence) per text; `supports`: what the attempt's verdicts say of each (None: unknown)."""
        if not texts:
            return []
        probabilities = softmax(features(texts, self.encoder, supports) @ self.fitted.weights.T)
        return [(self.fitted.classes[index], confidence)
                for index, confidence in decide(probabilities, self.closure_index, self.fitted.settings)]

    @property
    def closure_index(self) -> int:
        return self.fitted.classes.index(self.taxonomy.closure_category)


def decide(probabilities: np.ndarray, closure: int, settings: FitSettings) -> list[tuple[int, float]]:
    """(class index, confidence = its probability's lead over the runner-up) per row, with the closure threshold."""
    out = []
    for row in probabilities:
        best = closure if settings.closure_threshold and row[closure] >= settings.closure_threshold \
            else int(np.argmax(row))
        runner_up = max(float(p) for i, p in enumerate(row) if i != best)
        out.append((best, max(0.0, float(row[best]) - runner_up)))
    return out
