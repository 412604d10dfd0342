"""The agents' port to the judge: anything with `async evaluate(problem_id, kernel_source, dsl, preset, seed) -> dict`.

Agents never import Ray. An `EvaluatorActor` used as a plain object satisfies the port as it is; a Ray actor handle
is wrapped by `RayEvaluatorPort` (its method is `.remote()`, returning an awaitable ObjectRef).
"""
from __future__ import annotations

from typing import Any, Optional, Protocol, runtime_checkable


@runtime_checkable
class EvaluatorPort(Protocol):
    async def evaluate(self, problem_id: str, kernel_source: str, dsl: str, preset: Optional[str] = None,
                       seed: Optional[int] = None) -> dict[str, Any]:
        """Judge one kernel source; returns `Verdict.model_dump(mode="json")`."""
        ...


class RayEvaluatorPort:
    """Adapts a Ray actor handle of `EvaluatorActor` to the port."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    async def evaluate(self, problem_id: str, kernel_source: str, dsl: str, preset: Optional[str] = None,
                       seed: Optional[int] = None) -> dict[str, Any]:
        return await self.handle.evaluate.remote(problem_id, kernel_source, dsl, preset, seed)


def as_evaluator_port(evaluator: Any) -> EvaluatorPort:
    """A plain evaluator (an `EvaluatorActor` instance, a fake) as it is; a Ray actor handle wrapped."""
    method = getattr(evaluator, "evaluate", None)
    if method is None:
        raise TypeError(f"{type(evaluator).__name__} has no evaluate method")
    if hasattr(method, "remote"):  # a Ray ActorMethod
        return RayEvaluatorPort(evaluator)
    return evaluator
