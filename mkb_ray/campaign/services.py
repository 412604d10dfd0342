"""The long-lived services a campaign's trials talk to: evaluator actors and model servers.

Started by the driver from the config, never sharing a GPU (evaluators take `num_gpus=1` each; model servers
reserve theirs through Ray Serve) unless the config splits one (`scheduler.model_gpu_fraction`: a one-GPU host).
Submissions reach the evaluators through one router actor, which sends each to the evaluator with the most free
room and queues it, in arrival order, while every slot is taken
(`actors/evaluator_slots.py` says why); `EvaluatorPool.capacity` is how many judgements run at once. Evaluators restart
on their own (Ray `max_restarts`) and a call that was in flight when one died is retried on the restarted actor
(`max_task_retries`), so the submission is judged again; one whose restarts are spent is retired by the router and its
submission judged on another. A model server that stops answering is restarted by the scheduler through
`ModelServices.restart`.
"""
from __future__ import annotations

import logging
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Optional

from ..actors.evaluator_slots import PoolLoad
from ..checker.request import JudgeOptions
from ..models.serve_config import GpuShare

log = logging.getLogger(__name__)

# Bounded: an actor that keeps dying (a broken node) must surface as failures, not loop forever.
EVALUATOR_MAX_RESTARTS = 5
EVALUATOR_MAX_TASK_RETRIES = 3
# Bounded likewise. A restarted router counts in-flight judgements from zero, so for a while it may send work to
# an evaluator still finishing what the dead one forwarded; that evaluator's own slots queue it meanwhile.
ROUTER_MAX_RESTARTS = 5
ROUTER_MAX_TASK_RETRIES = 3
LOAD_TIMEOUT_S = 30.0
SERVER_START_TIMEOUT_S = 1800.0
HEALTH_TIMEOUT_S = 90.0  # a one-token completion on a busy CPU server takes seconds


class EvaluatorPool:
    """The evaluator port over the campaign's EvaluatorActors, through their router (`actors/evaluator_router.py`):
    a submission goes to the evaluator with the most free room; ties to the one the source's hash prefers, so
    re-judging a kernel tends to find that evaluator's compile cache. Picklable: trials on other nodes receive it as
    an argument, and every copy talks to the same router, which counts the load of all of them."""

    def __init__(self, router: Any, handles: list[Any], slots: list[int]) -> None:
        if not handles:
            raise ValueError("an evaluator pool needs at least one evaluator actor")
        if len(handles) != len(slots):
            raise ValueError(f"{len(handles)} evaluator actors but {len(slots)} slot counts")
        self.router = router
        self.handles = list(handles)  # EvaluatorActor handles, for their stats and for fault tests
        self.slots = list(slots)      # judgements each evaluator runs at once, in the order of `handles`

    @property
    def capacity(self) -> int:
        """Judgements all the evaluators run at once (the router queues the rest)."""
        return sum(self.slots)

    async def evaluate(self, problem_id: str, kernel_source: str, dsl: str, preset: Optional[str] = None,
                       seed: Optional[int] = None) -> dict[str, Any]:
        affinity = zlib.crc32(kernel_source.encode())
        return await self.router.evaluate.remote(problem_id, kernel_source, dsl, preset, seed, affinity)

    def stop(self) -> None:
        """Kill the router and the evaluators (a cluster run's are detached and outlive the driver otherwise)."""
        import ray

        for handle in [self.router, *self.handles]:
            try:
                ray.kill(handle)
            except Exception:  # noqa: BLE001 - already gone
                pass

    def load(self, timeout_s: float = LOAD_TIMEOUT_S) -> PoolLoad:
        """Judgements in flight per evaluator and submissions waiting, as the router counts them now."""
        import ray

        return ray.get(self.router.load.remote(), timeout=timeout_s)


def evaluator_slot_counts(device: str, slots: int, gpus: int) -> list[int]:
    """Slots per evaluator: one evaluator per GPU with one slot each (device cuda), or one with `slots` (cpu)."""
    if device == "cuda":
        if gpus == 0:
            raise RuntimeError("evaluator_devices is cuda but the Ray cluster has no GPU")
        return [1] * gpus
    if slots < 1:
        raise ValueError(f"a CPU evaluator needs at least one slot, got {slots}")
    return [slots]


def evaluator_gpu_share(model_gpu_fraction: float) -> float:
    """The share of a GPU each GPU evaluator asks for: all of it, or what a model replica that shares the GPU
    (`scheduler.model_gpu_fraction` below 1) leaves."""
    return 1.0 if model_gpu_fraction >= 1 else round(1.0 - model_gpu_fraction, 6)


def route_evaluators(handles: list[Any], slots: list[int],
                     router_options: Optional[dict[str, Any]] = None) -> EvaluatorPool:
    """The pool over started evaluator actors (`slots[i]` judgements at once on `handles[i]`), with its router."""
    from ..actors.evaluator_router import make_evaluator_router

    router = make_evaluator_router(handles, slots, max_restarts=ROUTER_MAX_RESTARTS,
                                   max_task_retries=ROUTER_MAX_TASK_RETRIES, actor_options=router_options)
    return EvaluatorPool(router, handles, slots)


def _kept_options(keep_as: Optional[str], suffix: str) -> dict[str, Any]:
    """Actor options that let a cluster run's services outlive its driver: named after the run (`keep_as`),
    detached, and found again (`get_if_exists`) by the driver that resumes the run. Empty for a local run."""
    if keep_as is None:
        return {}
    from ..actors.trial_launcher import NAMESPACE

    return {"name": f"{keep_as}-{suffix}", "namespace": NAMESPACE, "lifetime": "detached", "get_if_exists": True}


def start_evaluators(device: str, slots: int, problems_root: Optional[str],
                     baseline_cache_dir: Optional[str] = None, placement: Any = None,
                     keep_as: Optional[str] = None, protocol: str = "mkb-ray",
                     gpu_share: float = 1.0) -> EvaluatorPool:
    """One evaluator per GPU of the cluster (device cuda), or one with `slots` CPU slots (device cpu); they cache
    baselines in `baseline_cache_dir` (the run directory's, so that a resumed run reuses them). `placement`
    (mkb_ray.campaign.placement): a `roles` placement puts GPU evaluators on the evaluation group's nodes only.
    `keep_as`: a cluster run's name for its services, which then survive the driver (see `_kept_options`).
    `protocol`: the grading protocol every judgement uses (JudgeOptions.protocol). `gpu_share`: the share of its GPU
    each GPU evaluator asks for (below 1 where a model replica shares the GPU: `evaluator_gpu_share`)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from ..actors.evaluator import make_evaluator

    role = dict(placement.evaluator) if placement is not None and device == "cuda" else {}
    resources = ray.cluster_resources()
    gpus = int(resources.get(next(iter(role)), 0) if role else resources.get("GPU", 0)) if device == "cuda" else 0
    slot_counts = evaluator_slot_counts(device, slots, gpus)
    handles = [make_evaluator(device, slots=n, problems_root=problems_root, baseline_cache_dir=baseline_cache_dir,
                              options=JudgeOptions(protocol=protocol), gpu_share=gpu_share,
                              max_restarts=EVALUATOR_MAX_RESTARTS, max_task_retries=EVALUATOR_MAX_TASK_RETRIES,
                              actor_options={**({"resources": role} if role else {}),
                                             **_kept_options(keep_as, f"eval-{i}")})
               for i, n in enumerate(slot_counts)]
    if keep_as is not None:
        # The router reserves nothing: pinned to this (head) node, so no scale-down of an idle worker takes it.
        here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
        log.info("%d evaluator actor(s) on %s, %d judgement slot(s) in all (kept as %s)", len(handles), device,
                 sum(slot_counts), keep_as)
        return route_evaluators(handles, slot_counts,
                                {**_kept_options(keep_as, "router"), "scheduling_strategy": here})
    log.info("%d evaluator actor(s) on %s, %d judgement slot(s) in all", len(handles), device, sum(slot_counts))
    return route_evaluators(handles, slot_counts)


@dataclass
class ServedModel:
    name: str
    spec: Any
    handle: Any = None
    restarts: int = 0
    started_s: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)  # what the server's start() returned (api_base, port, ...)

    @property
    def api_base(self) -> Optional[str]:
        return self.info.get("api_base")


@dataclass
class ModelServices:
    """Our model servers (roster `local_vllm` models) for one campaign; API models need none."""

    models: dict[str, ServedModel] = field(default_factory=dict)
    gpu: GpuShare = field(default_factory=GpuShare)   # GPU replicas' placement (scheduler.model_gpu_fraction, roles)

    def start(self, specs: list[Any]) -> None:
        """Start a server for every local model in `specs` (in parallel) and wait until all serve."""
        import ray

        from ..actors.model_server import make_model_server

        pending = {}
        for spec in specs:
            if not spec.is_local or spec.name in self.models:
                continue
            handle = make_model_server(spec, gpu=self.gpu)
            pending[spec.name] = (spec, handle, handle.start.remote(), time.monotonic())
        for name, (spec, handle, ref, began) in pending.items():
            info = ray.get(ref, timeout=SERVER_START_TIMEOUT_S)
            self.models[name] = ServedModel(name, spec, handle, started_s=time.monotonic() - began, info=info)
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
        served.handle = make_model_server(served.spec, gpu=self.gpu)
        info = ray.get(served.handle.start.remote(), timeout=SERVER_START_TIMEOUT_S)
        served.restarts, served.info = served.restarts + 1, info
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

    from ..models.processes import wait_for

    def name_free() -> bool:
        try:
            ray.get_actor(actor_name)
        except ValueError:
            return True
        return False

    if not wait_for(name_free, timeout_s, every_s=0.2):
        raise RuntimeError(f"actor {actor_name} still exists {timeout_s:.0f} s after it was killed")
