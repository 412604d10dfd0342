"""Agents: the chat agent and the workspace agent, with what they share (budget, evaluator port, templates, the
attempt context). Pure asyncio and Ray-free. Public names load lazily, so importing one agent does not import
the others (the workspace agent's sandbox, litellm)."""
from __future__ import annotations

from typing import Any

__all__ = ["AgentOutcome", "AttemptContext", "AttemptStopped", "Budget", "ChatAgent", "EvaluatorPort",
           "RayEvaluatorPort", "SubmissionOutcome", "TaskStatement", "as_evaluator_port", "template_hash"]

_EXPORTS = {
    "AgentOutcome": "context", "AttemptContext": "context", "AttemptStopped": "context",
    "SubmissionOutcome": "context", "TaskStatement": "context", "Budget": "budget", "ChatAgent": "chat",
    "EvaluatorPort": "evaluator_port", "RayEvaluatorPort": "evaluator_port", "as_evaluator_port": "evaluator_port",
    "template_hash": "skill",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
