"""ModelServer: one roster model behind one OpenAI-compatible vLLM endpoint on 127.0.0.1, as a Ray actor.

What it adds to the endpoints of `mkb_ray.models.endpoints`:
- placement from the roster: GPU models run under Ray Serve LLM with the roster's TP size, prefix caching,
  session affinity (`x-session-id`, one id per attempt) and explicit autoscaling bounds; CPU models (the embedded
  SmolLM2) run the same Ray Serve LLM path on vLLM's CPU backend, falling back to a plain vLLM API-server process
  when Serve cannot run (`backend="auto"`; the reason is kept in `info()["fallback_reason"]`);
- the model's weights: the converted SmolLM2 directory (built once) or the HF repo id;
- idempotent `start()` that returns only once the endpoint answers, `health()`, `info()`, memory accounting;
- `stop()` that frees everything it started and checks it: every replica/engine process it owned on this node is
  gone (force-killed if it lingered, and reported), and the HTTP port it opened is closed.
Methods are synchronous; the Ray actor runs them on a small thread pool so `health()` answers while `start()` waits.
"""
from __future__ import annotations

import logging
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

from mkb_ray.models import processes
from mkb_ray.models.endpoints import Endpoint, EndpointError, ServeLLMEndpoint, VLLMProcessEndpoint, probe_completion
from mkb_ray.models.roster import ModelSpec
from mkb_ray.models.serve_config import SESSION_HEADER, CpuTuning, GpuShare, Placement

logger = logging.getLogger(__name__)

Backend = Literal["auto", "ray_serve_llm", "vllm_subprocess"]


def model_source(spec: ModelSpec, models_dir: Optional[Path] = None) -> str:
    """What vLLM loads for `spec`: the converted SmolLM2 directory (built once, under `models_dir`) or the HF repo."""
    if spec.local_source == "smollm2_gguf":
        from mkb_ray.models.smollm2 import ensure_smollm2

        return str(ensure_smollm2(models_dir))
    return spec.hf_repo or ""


@dataclass
class ServerState:
    started: bool = False
    startup_s: Optional[float] = None
    fallback_reason: Optional[str] = None
    stop_report: dict[str, Any] = field(default_factory=dict)


class ModelServer:
    """Serves `spec` on 127.0.0.1:`port` (0 = a free port) until `stop()`."""

    def __init__(self, spec: ModelSpec, placement: Optional[Placement] = None, backend: Backend = "auto",
                 port: int = 0, startup_timeout_s: float = 900.0, stop_timeout_s: float = 60.0,
                 tuning: CpuTuning = CpuTuning(), models_dir: Optional[str] = None,
                 log_dir: Optional[str] = None, gpu: GpuShare = GpuShare()) -> None:
        if not spec.is_local:
            raise ValueError(f"model '{spec.name}' is served by its API provider ({spec.api_litellm_id}); "
                             f"there is nothing to start")
        self.spec = spec
        self.placement: Placement = placement or ("gpu" if spec.num_gpus > 0 else "cpu")
        if self.placement == "gpu" and backend == "vllm_subprocess":
            raise ValueError("GPU models are served through Ray Serve LLM only")
        self.backend = backend
        self.port = port or processes.free_port()
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.tuning = tuning
        self.gpu = gpu   # a GPU replica's share of each GPU and, on a `roles` cluster, its group's resource
        self.models_dir = Path(models_dir) if models_dir else None
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="mkb-model-server-"))
        self.state = ServerState()
        self._endpoint: Optional[Endpoint] = None

    def _model_source(self) -> str:
        return model_source(self.spec, self.models_dir)

    def _make(self, backend: str, source: str) -> Endpoint:
        if backend == "ray_serve_llm":
            return ServeLLMEndpoint(self.spec, self.placement, source, self.port, self.tuning, self.gpu)
        return VLLMProcessEndpoint(self.spec, self.placement, source, self.port, self.log_dir, self.tuning)

    def start(self) -> dict[str, Any]:
        """Bring the endpoint up (idempotent) and wait until it answers; returns `info()`."""
        if self.state.started:
            return self.info()
        begun = time.monotonic()
        source = self._model_source()
        first = "vllm_subprocess" if self.backend == "vllm_subprocess" else "ray_serve_llm"
        self._endpoint = self._make(first, source)
        try:
            self._endpoint.start(self.startup_timeout_s)
        except Exception as err:  # noqa: BLE001 - any Serve failure may fall back; the reason is kept
            self.stop()
            if not (self.backend == "auto" and self.placement == "cpu"):
                raise
            self.state.fallback_reason = f"{type(err).__name__}: {err}"
            logger.warning("Ray Serve LLM failed for %s (%s); serving with a vLLM process instead",
                           self.spec.name, self.state.fallback_reason)
            self.state.stop_report = {}
            self._endpoint = self._make("vllm_subprocess", source)
            self._endpoint.start(self.startup_timeout_s)
        self.state.started = True
        self.state.startup_s = time.monotonic() - begun
        logger.info("%s serving at %s (%s, %.0f s)", self.spec.name, self._endpoint.api_base,
                    self._endpoint.backend, self.state.startup_s)
        return self.info()

    def health(self, deep: bool = False) -> dict[str, Any]:
        """Whether the endpoint serves; `deep` also asks it for a one-token completion (a dead engine behind a
        live front end still lists its model)."""
        if self._endpoint is None or not self.state.started:
            return {"healthy": False, "detail": "not started", "model": self.spec.name}
        began = time.monotonic()
        ok, detail = self._endpoint.status()
        if ok and deep:
            ok, detail = probe_completion(self._endpoint.api_base, self.spec.name)
        return {"healthy": ok, "detail": detail, "model": self.spec.name,
                "latency_s": round(time.monotonic() - began, 4)}

    def info(self) -> dict[str, Any]:
        endpoint = self._endpoint
        return {
            "model": self.spec.name,
            "litellm_id": self.spec.litellm_id,
            "api_base": endpoint.api_base if endpoint and self.state.started else None,
            "session_header": SESSION_HEADER,
            "placement": {"kind": self.placement, "backend": endpoint.backend if endpoint else None,
                          "num_gpus": self.spec.num_gpus, "tensor_parallel_size": self.spec.tensor_parallel_size,
                          **({"gpu_fraction": self.gpu.fraction} if self.gpu.shared else {}),
                          "min_replicas": self.spec.min_replicas, "max_replicas": self.spec.max_replicas},
            "port": endpoint.port if endpoint else self.port,
            "max_concurrency": self.spec.max_concurrency,
            "log_dir": str(self.log_dir),
            **{k: v for k, v in asdict(self.state).items() if k != "stop_report"},
        }

    def pids(self) -> list[int]:
        """Processes this server started on this node (replicas, vLLM API server, EngineCore, workers)."""
        return self._endpoint.pids() if self._endpoint else []

    def memory(self) -> dict[str, float]:
        return asdict(processes.memory_of(self.pids()))

    def stop(self) -> dict[str, Any]:
        """Free everything this server started; returns what was stopped and anything that had to be killed."""
        endpoint, self._endpoint = self._endpoint, None
        if endpoint is None:
            return self.state.stop_report or {"stopped": False, "detail": "not running"}
        owned = endpoint.pids()
        forced = endpoint.stop(self.stop_timeout_s)
        left = processes.alive(owned)
        self.state.started = False
        self.state.stop_report = {"stopped": True, "backend": endpoint.backend, "processes": len(owned),
                                  "force_killed": forced, "still_running": left,
                                  "port_open": processes.port_open(endpoint.port)}
        return self.state.stop_report


def make_model_server(spec: ModelSpec, placement: Optional[Placement] = None, name: Optional[str] = None,
                      **kwargs: Any) -> Any:
    """Start (or find) the ModelServer actor for `spec` on Ray; call `.start.remote()` on it to serve.

    The actor takes no CPU or GPU itself: Ray Serve reserves the model's resources for its replicas. It is named
    `mkb-model-server:<model>`, so a second caller gets the same actor instead of a second server.
    """
    import ray

    remote_class = ray.remote(num_cpus=0, max_concurrency=4)(ModelServer)
    return remote_class.options(name=name or f"mkb-model-server:{spec.name}", get_if_exists=True).remote(
        spec, placement, **kwargs)


__all__ = ["ModelServer", "make_model_server", "model_source", "EndpointError"]
