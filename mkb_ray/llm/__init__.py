"""The LLM client (litellm, imported lazily) and its reply types."""
from __future__ import annotations

from .client import LLMCallError, LLMClient, LLMReply, ModelSpecLike, ScriptedReply, ToolCall

__all__ = ["LLMClient", "LLMReply", "LLMCallError", "ModelSpecLike", "ScriptedReply", "ToolCall"]
