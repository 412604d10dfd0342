"""A scripted model for agent tests: replies come from a list (through litellm's mock_response, so the real client
code runs), and every conversation the model was sent is kept for assertions."""
from __future__ import annotations

from typing import Any

from mkb_ray.llm import LLMCallError, ScriptedReply


class Recorder:
    """A script that keeps every conversation the model was sent."""

    def __init__(self, replies: list[ScriptedReply]) -> None:
        self.replies = replies
        self.seen: list[list[dict[str, Any]]] = []

    def __call__(self, messages: list[dict[str, Any]], index: int) -> ScriptedReply:
        self.seen.append([dict(m) for m in messages])
        if index >= len(self.replies):
            raise LLMCallError(f"script exhausted at call {index + 1}", "script_exhausted", 1, 0.0)
        return self.replies[index]

    def feedback_after(self, call: int) -> str:
        """The last user message the model saw at call `call` (0-based): the feedback on the reply before it."""
        return [m for m in self.seen[call] if m["role"] == "user"][-1]["content"]

    def answers_before(self, call_index: int) -> list[str]:
        """What the model was told after its previous reply: the tool results (or user feedback) that follow the
        last assistant message of the conversation sent at `call_index`."""
        messages = self.seen[call_index]
        last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
        return [str(m["content"]) for m in messages[last + 1:]]
