"""Models: the roster (`experiments/models/*.yaml`), the embedded SmolLM2, and how vLLM serves them.

Import-light: Ray, vLLM and transformers load only when a server starts or a model is converted.
"""
from __future__ import annotations

from mkb_ray._lazy import lazy_exports

__all__ = ["ModelSpec", "ModelPrices", "RosterError", "load_roster", "get_model", "ensure_smollm2",
           "CpuTuning", "llm_config_kwargs", "openai_app_config", "api_server_argv", "SESSION_HEADER",
           "init_local_ray"]

_EXPORTS = {
    "ModelSpec": "mkb_ray.models.roster",
    "ModelPrices": "mkb_ray.models.roster",
    "RosterError": "mkb_ray.models.roster",
    "load_roster": "mkb_ray.models.roster",
    "get_model": "mkb_ray.models.roster",
    "ensure_smollm2": "mkb_ray.models.smollm2",
    "CpuTuning": "mkb_ray.models.serve_config",
    "llm_config_kwargs": "mkb_ray.models.serve_config",
    "openai_app_config": "mkb_ray.models.serve_config",
    "api_server_argv": "mkb_ray.models.serve_config",
    "SESSION_HEADER": "mkb_ray.models.serve_config",
    "init_local_ray": "mkb_ray.models.local_ray",
}


__getattr__ = lazy_exports(__name__, _EXPORTS)
