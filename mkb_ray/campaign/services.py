"""The long-lived services a campaign's trials talk to: evaluator actors and model servers.

Started by the driver from the config, never sharing a GPU (evaluators take `num_gpus=1` each; model servers
reserve theirs through Ray Serve). Evaluators restart on their own (Ray `max_restarts`) and a call that was in
flight when one died is retried on the restarted actor (`max_task_retries`), so the submission is judged again.
A model server that stops answering is restarted by the scheduler through `ModelServices.restart`.
"""
from __future__ import annotations

import logging
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Optional

log = logging.getLogger(__name__)

# Bounded: an actor that keeps dying (a broken node) must surface as failures, not loop forever.
EVALUATOR_MAX_RESTARTS = 5
EVALUATOR_MAX_TASK_RETRIES = 3
SERVER_START_TIMEOUT_S = 1800.0
HEALTH_TIMEOUT_S = 90.0  # a one-token completion on a busy CPU server takes seconds


class EvaluatorPool:
    """The evaluator port over several EvaluatorActor handles: a submission goes to one chosen by its content,
    so re-judging the same kernel lands on the same actor (and its compile cache). Picklable: trials on other
    nodes receive it as an argument."""

    def __init__(self, handles: list[Any]) -> None:
        if not handles:
            raise ValueError("an evaluator pool needs at least one evaluator actor")
        self.handles = list(handles)

    async def evaluate(self, problem_id: str, kernel_source: str, dsl: str, preset: Optional[str] = None,
                       seed: Optional[int] = None) -> dict[str, Any]:
        handle = self.handles[zlib.crc32(kernel_source.encode()) % len(self.handles)]
        return await handle.evaluate.remote(problem_id, kernel_source, dsl, preset, seed)


def start_evaluators(device: str, slots: int, problems_root: Optional[str],
                     baseline_cache_dir: Optional[str] = None) -> EvaluatorPool:
    """One evaluator per GPU of the cluster (device cuda), or one with `slots` CPU slots (device cpu); they cache
    baselines in `baseline_cache_dir` (the run directory's, so that a resumed run reuses them)."""
    import ray

    from ..actors.evaluator import make_evaluator

    count = int(ray.cluster_resources().get("GPU", 0)) if device == "cuda" else 1
    if device == "cuda" and count == 0:
        raise RuntimeError("evaluator_devices is cuda but the Ray cluster has no GPU")
    handles = [make_evaluator(device, slots=1 if device == "cuda" else slots, problems_root=problems_root,
                              baseline_cache_dir=baseline_cache_dir, max_restarts=EVALUATOR_MAX_RESTARTS, max_task_retries=EVALUATOR_MAX_TASK_RETRIES)
               for _ in range(max(1, count))]
    log.info("%d evaluator actor(s) on %s", len(handles), device)
    return EvaluatorPool(handles)


@dataclass
class ServedModel:
    name: str
    spec: Any
    handle: Any = None
    api_base: Optional[str] = None
    restarts: int = 0
    started_s: float = 0.0


@dataclass
class ModelServices:
    """Our model servers (roster `local_vllm` models) for one campaign; API models need none."""

    models: dict[str, ServedModel] = field(default_factory=dict)

    def start(self, specs: list[Any]) -> None:
        """Start a server for every local model in `specs` (in parallel) and wait until all serve."""
        import ray

        from ..actors.model_server import make_model_server

        pending = {}
        for spec in specs:
            if not spec.is_local or spec.name in self.models:
                continue
            handle = make_model_server(spec)
            pending[spec.name] = (spec, handle, handle.start.remote(), time.monotonic())
        for name, (spec, handle, ref, began) in pending.items():
            info = ray.get(ref, timeout=SERVER_START_TIMEOUT_S)
            self.models[name] = ServedModel(name, spec, handle, info["api_base"], 0, time.monotonic() - began)
            log.info("model %s serving at %s (%.0f s)", name, info["api_base"], time.monotonic() - began)

    def api_base(self, name: str) -> Optional[str]:
        served = self.models.get(name)
        return served.api_base if served else None

    def healthy(self, name: str) -> bool:
        """True for API models; for ours, whether the server answers its health probe."""
        import ray

        served = self.models.get(name)
        if served is None:
            return True
        try:
            report = ray.get(served.handle.health.remote(deep=True), timeout=HEALTH_TIMEOUT_S)
        except Exception as err:  # noqa: BLE001 - a dead actor or a timeout is an unhealthy server
            log.warning("model server %s health probe failed: %s", name, err)
            return False
        if not report.get("healthy"):
            log.warning("model server %s is unhealthy: %s", name, report.get("detail"))
        return bool(report.get("healthy"))

    def restart(self, name: str) -> str:
        """Stop what is left of a model's server and start a fresh one; returns the new api_base."""
        import ray

        from ..actors.model_server import make_model_server

        served = self.models[name]
        try:
            ray.get(served.handle.stop.remote(), timeout=300)
        except Exception as err:  # noqa: BLE001 - the old server may be gone entirely
            log.warning("stopping model server %s: %s", name, err)
        try:
            ray.kill(served.handle)
        except Exception:  # noqa: BLE001 - already gone
            pass
        _wait_name_free(f"mkb-model-server:{name}")
        began = time.monotonic()
        served.handle = make_model_server(served.spec)
        info = ray.get(served.handle.start.remote(), timeout=SERVER_START_TIMEOUT_S)
        served.api_base, served.restarts = info["api_base"], served.restarts + 1
        log.info("model server %s restarted in %.0f s at %s", name, time.monotonic() - began, served.api_base)
        return served.api_base

    def stop_all(self) -> None:
        import ray

        for served in self.models.values():
            try:
                ray.get(served.handle.stop.remote(), timeout=300)
            except Exception as err:  # noqa: BLE001 - best effort at shutdown; say what was left
                log.warning("stopping model server %s: %s", served.name, err)
        self.models.clear()


def _wait_name_free(actor_name: str, timeout_s: float = 60.0) -> None:
    """A killed named actor frees its name asynchronously; creating the replacement earlier would find the corpse
    (make_model_server uses get_if_exists)."""
    import ray

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get_actor(actor_name)
        except ValueError:
            return
        time.sleep(0.2)
    raise RuntimeError(f"actor {actor_name} still exists {timeout_s:.0f} s after it was killed")
