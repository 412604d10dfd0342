"""Which Ray resources each kind of campaign work asks for: where a trial, an evaluator and a model server run.

`local` (one machine): plain CPUs and GPUs. `roles` (a cluster): each role asks for its own custom resource, which
only its node group offers (experiments/clusters/*: the names here are the ones those configs give their nodes), so
model servers and evaluators never share a GPU and agent loops with their sandboxes run on CPU nodes — and a
pending task or actor that asks for a role's resource is what makes the autoscaler start a node of that group.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

PlacementMode = Literal["local", "roles"]

AGENT_RESOURCE = "mkb_agent_cpu"     # one per concurrent attempt (agent loop + its kernel sandboxes)
EVAL_RESOURCE = "mkb_eval_gpu"       # one per evaluator GPU
MODEL_RESOURCE = "mkb_model_gpu"     # one per model-server GPU


@dataclass(frozen=True)
class Placement:
    mode: PlacementMode = "local"
    trial: dict[str, float] = field(default_factory=dict)       # custom resources of each trial task
    evaluator: dict[str, float] = field(default_factory=dict)   # ... of each GPU evaluator actor
    model_gpu: dict[str, float] = field(default_factory=dict)   # ... per GPU of a model server replica

    @classmethod
    def of(cls, mode: PlacementMode) -> "Placement":
        if mode == "local":
            return cls()
        return cls(mode="roles", trial={AGENT_RESOURCE: 1.0}, evaluator={EVAL_RESOURCE: 1.0},
                   model_gpu={MODEL_RESOURCE: 1.0})

    def gpu_target(self, cluster_resources: dict[str, float]) -> bool:
        """Whether a cluster with these resources (ray.cluster_resources()) judges on GPUs: decided by the
        cluster, not by the driver's host (a CPU head node still plans for its evaluators' GPUs). An autoscaled
        evaluator group with no node up yet shows no resource: such a cluster needs `evaluator_devices: cuda`
        in the config (which wins over this guess), or `min_workers: 1` for the group, as our configs have."""
        if self.mode == "roles":
            return cluster_resources.get(EVAL_RESOURCE, 0) > 0 or cluster_resources.get("GPU", 0) > 0
        return cluster_resources.get("GPU", 0) > 0
