"""The model roster: one YAML file per model under `experiments/models/`, validated into `ModelSpec`s.

A spec says how to reach a model (`serving`: our own vLLM server, or a provider API through litellm), what it
costs, how many attempts may talk to it at once, and whether the workspace agent can use it (tool calling).
Every field is checked with `extra="forbid"`, so a typo in a YAML is an error naming the file and the field.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

ROSTER_SCHEMA_VERSION = 1
# Roster names become served model names, Ray Serve app names and URL path parts: keep them plain.
_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"


class ModelPrices(BaseModel):
    """What one call costs. API models: per million tokens. Local models: per GPU-hour of the server."""

    model_config = ConfigDict(extra="forbid")
    usd_per_mtok_input: Optional[float] = Field(None, ge=0, description="USD per 1e6 prompt tokens")
    usd_per_mtok_output: Optional[float] = Field(None, ge=0, description="USD per 1e6 completion tokens")
    usd_per_mtok_cached_input: Optional[float] = Field(None, ge=0, description="USD per 1e6 cached prompt tokens")
    usd_per_gpu_hour: Optional[float] = Field(None, ge=0, description="USD per GPU-hour (local serving)")
    source: Optional[str] = Field(None, description="where the numbers come from, and when")


class ModelSpec(BaseModel):
    """One roster model."""

    model_config = ConfigDict(extra="forbid")
    schema_version: Literal[1] = ROSTER_SCHEMA_VERSION
    name: str = Field(pattern=_NAME_PATTERN, description="roster name; also the served model name")
    serving: Literal["local_vllm", "api"] = Field(
        description="local_vllm: our ModelServer (vLLM); api: a provider through litellm (api_litellm_id)")
    api_litellm_id: Optional[str] = Field(None, description="litellm provider id of this model (needed for api)")
    hf_repo: Optional[str] = Field(None, description="Hugging Face repo of the open weights (local_vllm on GPUs)")
    local_source: Optional[Literal["smollm2_gguf"]] = Field(
        None, description="weights built on this machine instead of downloaded (the embedded default)")
    tensor_parallel_size: int = Field(1, ge=1, description="vLLM tensor-parallel degree")
    pipeline_parallel_size: int = Field(1, ge=1, description="vLLM pipeline-parallel degree (multi-node)")
    num_gpus: int = Field(0, ge=0, description="GPUs one replica holds (= TP x PP); 0 = CPU serving")
    min_replicas: int = Field(1, ge=1, description="Ray Serve autoscaling lower bound")
    max_replicas: int = Field(1, ge=1, description="Ray Serve autoscaling upper bound")
    target_ongoing_requests: int = Field(8, ge=1, description="per-replica load that triggers scale-up")
    max_concurrency: int = Field(4, ge=1, description="attempts talking to this model at once (KV-cache bound)")
    supports_tools: bool = Field(description="reliable tool calling (the workspace agent needs it)")
    tool_call_parser: str = Field("hermes", description="vLLM --tool-call-parser for this model's tool-call format")
    context_length: int = Field(ge=512, description="max_model_len served / the provider's context window")
    max_output_tokens: int = Field(4096, ge=16, description="default completion cap per call")
    temperature: Optional[float] = Field(None, ge=0, description="sampling temperature sent with every call "
                                                                 "(None: the endpoint's default)")
    request_seed: bool = Field(True, description="the endpoint honours a per-request sampling seed (False: the "
                                                 "client never sends one)")
    open_fences: bool = Field(
        False, description="the chat agent starts each reply for the model with the fence it must write (```python "
                           "on kernel turns, ```skill on the closing SKILL.md turn), sent as the start of the "
                           "assistant message that our vLLM server continues; for models too weak to open a code "
                           "block unprompted. Ignored for API models")
    skill_format: Literal["free", "json_schema"] = Field(
        "free", description="how the chat agent's SKILL.md turns are answered: free (a ```skill block the model "
                            "writes) or json_schema (decoding constrained to the sections of "
                            "mkb_ray/agents/skill_schema.py, rendered as SKILL.md; our vLLM servers only)")
    repetition_penalty: Optional[float] = Field(
        None, gt=0, description="vLLM sampling repetition_penalty for our servers (None: the server default); "
                                "ignored for API models")
    gpu_dtype: Optional[Literal["bfloat16", "float16", "float32"]] = Field(
        None, description="vLLM --dtype when served on GPUs (None: the checkpoint's own)")
    gpu_kernel_warmup: bool = Field(
        True, description="on GPUs, vLLM's start-up FlashInfer autotune and CuTe DSL compile warm-up; false for a "
                          "model that uses neither (each start then skips them)")
    prices: ModelPrices = Field(default_factory=ModelPrices)
    notes: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> "ModelSpec":
        if self.serving == "api" and not self.api_litellm_id:
            raise ValueError("an api model needs api_litellm_id (its litellm provider id)")
        if self.serving == "local_vllm" and not (self.hf_repo or self.local_source):
            raise ValueError("a local_vllm model needs hf_repo or local_source")
        devices = self.tensor_parallel_size * self.pipeline_parallel_size
        # Checked for api models too: the file also describes how to serve the open weights ourselves.
        if self.num_gpus and self.num_gpus != devices:
            raise ValueError(f"num_gpus {self.num_gpus} must equal tensor_parallel_size x pipeline_parallel_size "
                             f"= {devices}")
        if not self.num_gpus and devices > 1:
            raise ValueError("CPU serving (num_gpus 0) runs one device: tensor/pipeline parallel sizes must be 1")
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas {self.min_replicas} > max_replicas {self.max_replicas}")
        return self

    def on_gpu(self) -> "ModelSpec":
        """This model served on GPUs (one per tensor × pipeline rank) where the roster serves it on the CPU:
        `mkb serve --device cuda`, or a GPU host's campaign with `scheduler.model_devices: cuda`."""
        if self.num_gpus:
            return self
        return self.model_copy(update={"num_gpus": self.tensor_parallel_size * self.pipeline_parallel_size})

    @property
    def litellm_id(self) -> str:
        """The id the LLM client passes to litellm: our OpenAI-compatible server, or the provider's id."""
        if self.serving == "local_vllm":
            return f"hosted_vllm/{self.name}"
        return self.api_litellm_id or ""  # never empty: the validator requires it for api models

    # Flat accessors: the LLM client reads prices off the spec without knowing the nesting.
    @property
    def usd_per_mtok_input(self) -> Optional[float]:
        return self.prices.usd_per_mtok_input

    @property
    def usd_per_mtok_output(self) -> Optional[float]:
        return self.prices.usd_per_mtok_output

    @property
    def usd_per_gpu_hour(self) -> Optional[float]:
        return self.prices.usd_per_gpu_hour

    @property
    def is_local(self) -> bool:
        return self.serving == "local_vllm"


class RosterError(ValueError):
    """A roster file that does not parse or validate; the message names the file and the field."""


def default_roster_dir() -> Path:
    """The roster shipped with this checkout."""
    return Path(__file__).resolve().parents[2] / "experiments" / "models"


def _format_errors(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        field = ".".join(str(p) for p in e["loc"]) or "(file)"
        message = "unknown field (typo?)" if e["type"] == "extra_forbidden" else e["msg"]
        parts.append(f"{field}: {message}")
    return "; ".join(parts)


def load_model_file(path: Path) -> ModelSpec:
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise RosterError(f"{path}: invalid YAML: {err}") from None
    if not isinstance(data, dict):
        raise RosterError(f"{path}: expected a mapping of fields, got {type(data).__name__}")
    try:
        spec = ModelSpec(**data)
    except ValidationError as err:
        raise RosterError(f"{path}: {_format_errors(err)}") from None
    if spec.name != path.stem:
        raise RosterError(f"{path}: name '{spec.name}' must match the file name '{path.stem}'")
    return spec


def load_roster(roster_dir: Path | None = None) -> dict[str, ModelSpec]:
    """All `*.yaml` models under `roster_dir` (default: the shipped roster), keyed by name."""
    root = roster_dir or default_roster_dir()
    if not root.is_dir():
        raise RosterError(f"roster directory {root} does not exist")
    roster: dict[str, ModelSpec] = {}
    for path in sorted(root.glob("*.yaml")):
        spec = load_model_file(path)
        roster[spec.name] = spec
    if not roster:
        raise RosterError(f"no *.yaml model files under {root}")
    return roster


def get_model(name: str, roster_dir: Path | None = None) -> ModelSpec:
    """One roster model by name; the error lists the known names."""
    roster = load_roster(roster_dir)
    if name not in roster:
        raise KeyError(f"no model '{name}' in the roster ({', '.join(sorted(roster))})")
    return roster[name]


def safe_name(name: str) -> str:
    """A roster name as a Ray Serve app / URL path component."""
    return re.sub(r"[^a-z0-9-]", "-", name.lower())
