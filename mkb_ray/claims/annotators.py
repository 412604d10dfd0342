"""One name -> one annotator, for every command that takes `--annotator`: 'offline' (rules + MiniLM),
'learned' (a classifier over the same signals, fitted to the dev gold split), or a roster model (the LLM annotator)."""
from __future__ import annotations

from typing import Any, Optional

from .taxonomy import Taxonomy

def make_annotator(name: str, taxonomy: Taxonomy, api_base: Optional[str] = None) -> Any:
    if name == "offline":
        from .offline import OfflineAnnotator

        return OfflineAnnotator(taxonomy)
    if name == "learned":
        from .learned import LearnedAnnotator

        return LearnedAnnotator(taxonomy)
    from .llm_annotator import LLMAnnotator

    return LLMAnnotator(name, taxonomy, api_base=api_base)
