"""EvaluatorRouter: one actor that routes every trial's submissions to the campaign's evaluators by load.

What it adds to `evaluator_slots.EvaluatorSlots` (least load, one arrival-order queue):
- one place that sees all the load: trials run as Ray tasks on any node, each with its own copy of the pool, so
  only a shared actor can count what every trial has in flight on each evaluator;
- forwarding: a submission is judged by the chosen EvaluatorActor and its verdict passed back unchanged; the slot
  stays taken until that evaluator answers, even when the caller gave up, because the evaluator is still judging;
- evaluators that died for good: Ray restarts a dead evaluator (`max_restarts`) and retries the call that was in
  flight (`max_task_retries`), so the router only sees a death once the restarts are spent; it then retires that
  evaluator and judges the submission on another (judging is idempotent). Without that, a dead evaluator, which
  answers at once with an error, would look the least loaded and draw every submission.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Optional

from mkb_ray.actors.evaluator_slots import EvaluatorSlots, NoEvaluatorLeft, PoolLoad

log = logging.getLogger(__name__)

# How long a probe waits for an evaluator that failed a call; a restarting one answers once it is back.
PROBE_TIMEOUT_S = 120.0
# Every submission of the campaign waits inside this actor (queued or forwarded); Ray queues calls past this many
# before the actor sees them, which would also hold up `load()` for the progress display.
ROUTER_MAX_CONCURRENCY = 10_000


class EvaluatorRouter:
    """Judges each submission on the evaluator with the most free room; `load()` says who holds what."""

    def __init__(self, evaluators: list[Any], slots: list[int]) -> None:
        if len(evaluators) != len(slots):
            raise ValueError(f"{len(evaluators)} evaluators but {len(slots)} slot counts")
        self._evaluators = list(evaluators)
        self._slots = EvaluatorSlots(slots)

    async def evaluate(self, problem_id: str, kernel_source: str, dsl: str, preset: Optional[str] = None,
                       seed: Optional[int] = None, affinity: int = 0) -> dict[str, Any]:
        """The chosen evaluator's `evaluate(...)`; `affinity` breaks ties between equally loaded evaluators."""
        from ray.exceptions import RayActorError

        while True:  # at most once per evaluator: each pass either returns, raises or retires one
            index = await self._slots.acquire(affinity)
            judging = asyncio.ensure_future(self._judge_on(index, problem_id, kernel_source, dsl, preset, seed))
            try:
                # Shielded: if our caller is cancelled, the judgement still runs and its slot frees when it ends.
                return await asyncio.shield(judging)
            except asyncio.CancelledError:
                judging.add_done_callback(_consume_outcome)
                raise
            except RayActorError as err:
                if not await self._died_for_good(index):
                    raise
                log.warning("evaluator %d died for good; judging the submission on another", index)
                if not any(e.alive for e in self._slots.load().evaluators):
                    raise NoEvaluatorLeft("every evaluator of the pool died for good") from err

    async def load(self) -> PoolLoad:
        return self._slots.load()

    async def _judge_on(self, index: int, problem_id: str, kernel_source: str, dsl: str, preset: Optional[str],
                        seed: Optional[int]) -> dict[str, Any]:
        try:
            return await self._evaluators[index].evaluate.remote(problem_id, kernel_source, dsl, preset, seed)
        finally:
            self._slots.release(index)

    async def _died_for_good(self, index: int) -> bool:
        """Whether evaluator `index` is dead with no restart left (then retired). A call can also fail on a live
        one (its retries spent while it restarted, or a node that is only unreachable): that is the caller's
        error, as before routing."""
        from ray.exceptions import ActorDiedError

        if not self._slots.is_alive(index):
            return True
        try:
            await asyncio.wait_for(_as_future(self._evaluators[index].__ray_ready__.remote()), PROBE_TIMEOUT_S)
        except ActorDiedError:
            self._slots.retire(index)
            return True
        except Exception:  # noqa: BLE001 - unreachable or slow to restart is not known dead
            return False
        return False


def _as_future(ref: Any) -> asyncio.Future:
    return asyncio.wrap_future(ref.future())


def _consume_outcome(task: asyncio.Future) -> None:
    """Nobody awaits a judgement whose caller was cancelled; read its error so asyncio does not log it as lost."""
    if not task.cancelled():
        task.exception()


def make_evaluator_router(evaluators: list[Any], slots: list[int], max_restarts: int = 0,
                          max_task_retries: int = 0, actor_options: Optional[dict[str, Any]] = None) -> Any:
    """Start an EvaluatorRouter on Ray. It reserves no CPU: it only forwards and counts. With `max_restarts`, Ray
    restarts a dead router (its counts start again from zero); with `max_task_retries`, a call in flight when it
    died is routed again, so that submission is judged again."""
    import ray

    remote_class = ray.remote(num_cpus=0, max_concurrency=ROUTER_MAX_CONCURRENCY, max_restarts=max_restarts,
                              max_task_retries=max_task_retries)(EvaluatorRouter)
    if actor_options:
        remote_class = remote_class.options(**actor_options)
    return remote_class.remote(list(evaluators), list(slots))
