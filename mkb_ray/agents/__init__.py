"""Agents: one attempt end to end (`run_attempt.run_attempt`), the chat agent and the workspace agent, with what they
share (budget, evaluator port, templates, the attempt context). Pure asyncio and Ray-free. Public names load
lazily, so importing one agent does not import the others (the workspace agent's sandbox, litellm)."""
from __future__ import annotations

from .._lazy import lazy_exports

__all__ = ["AgentOutcome", "AttemptContext", "AttemptStopped", "Budget", "ChatAgent", "EvaluatorPort",
           "RayEvaluatorPort", "SubmissionOutcome", "TaskStatement", "as_evaluator_port", "load_record",
           "run_attempt", "template_hash"]

_EXPORTS = {
    "AgentOutcome": "context", "AttemptContext": "context", "AttemptStopped": "context",
    "SubmissionOutcome": "context", "TaskStatement": "context", "Budget": "budget", "ChatAgent": "chat",
    "EvaluatorPort": "evaluator_port", "RayEvaluatorPort": "evaluator_port", "as_evaluator_port": "evaluator_port",
    "template_hash": "skill", "run_attempt": "run_attempt", "load_record": "run_attempt",
}


__getattr__ = lazy_exports(__name__, {name: f"{__name__}.{module}" for name, module in _EXPORTS.items()})
