"""TrialLauncher: a detached Ray actor that submits a cluster run's trial tasks, so that the tasks are its, not the
driver's.

Ray ties a task's life to its owner, the process that submitted it: when a driver dies, every task it submitted
is killed with it, and a 40-minute attempt in flight is lost. Tasks submitted by a detached actor outlive the
driver. The driver asks the launcher to submit each task and borrows the returned ObjectRef (`ray.wait`/`ray.get`
work on borrowed refs); a restarted driver finds the launcher by name (`launcher_name`), takes the refs it still
holds (`held`) and waits on them instead of submitting those trials again. The finished attempts write their own
outcomes to the run's spool (mkb_ray/campaign/spool.py), so even a lost launcher loses no finished work.

The launcher is pinned to the driver's node (the head): an autoscaler scales down nodes whose resources are idle,
and a 0-CPU actor on a worker node would be taken down with it — and its tasks with it.
"""
from __future__ import annotations

import hashlib
from typing import Any, Callable

NAMESPACE = "mkb-ray"


def launcher_name(run_dir: str) -> str:
    """The launcher's actor name for a run directory (absolute path): one launcher per run."""
    return "mkb-launcher-" + hashlib.sha256(run_dir.encode()).hexdigest()[:16]


class TrialLauncher:
    """Submits trial tasks and holds their refs until the driver says they are committed."""

    def __init__(self, task: Callable[..., Any]) -> None:
        import ray

        self._remote = ray.remote(max_retries=0)(task)
        self._held: dict[str, tuple[list[str], str, Any]] = {}   # key -> (trial ids, model, ref)

    def launch(self, key: str, trial_ids: list[str], model: str, options: dict[str, Any], *args: Any) -> list[Any]:
        """Submit one task (`options`: Ray resources) with `args`; returns [its ObjectRef] (wrapped in a list so
        that Ray hands the caller the ref itself, borrowed, not the task's result)."""
        previous = self._held.get(key)
        if previous is not None:   # the driver re-submits a task only to retry it: the old ref is done with
            del self._held[key]
        ref = self._remote.options(**options).remote(*args)
        self._held[key] = (list(trial_ids), model, ref)
        return [ref]

    def held(self) -> dict[str, tuple[list[str], str, list[Any]]]:
        """Every task submitted and not yet released: key -> (trial ids, model, [ref])."""
        return {key: (ids, model, [ref]) for key, (ids, model, ref) in self._held.items()}

    def release(self, keys: list[str]) -> int:
        """Forget tasks whose outcomes the driver committed; returns how many are still held."""
        for key in keys:
            self._held.pop(key, None)
        return len(self._held)


def get_or_start_launcher(run_dir: str, task: Callable[..., Any]) -> tuple[Any, bool]:
    """The run's launcher: the one a previous driver left running, or a new one on this driver's node. Returns
    (handle, whether it already existed)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    name = launcher_name(run_dir)
    try:
        return ray.get_actor(name, namespace=NAMESPACE), True
    except ValueError:
        pass
    here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
    handle = ray.remote(TrialLauncher).options(
        name=name, namespace=NAMESPACE, lifetime="detached", num_cpus=0, max_concurrency=1,
        scheduling_strategy=here, get_if_exists=True).remote(task)
    return handle, False
