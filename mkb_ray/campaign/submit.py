"""How the scheduler hands a batch of trials to Ray, and who owns the resulting task.

`DirectSubmitter`: the driver submits and owns its tasks — a local run, whose Ray dies with the driver anyway.
`LauncherSubmitter`: the run's detached launcher actor (actors/trial_launcher.py) submits and owns them, so they
run on when the driver dies; a restarted driver `adopt`s the tasks still held instead of submitting them again.
Both give the scheduler an ObjectRef per batch to `ray.wait` on, and are told when a batch's outcomes are
committed (`release`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Sequence


@dataclass(frozen=True)
class Launch:
    """One task to submit: its trials (by id), their model, and the task's arguments."""

    key: str
    trial_ids: list[str]
    model: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Adopted:
    """A task a previous driver submitted that is still held by the launcher."""

    key: str
    trial_ids: list[str]
    model: str
    ref: Any


class Submitter(Protocol):
    def submit(self, launches: Sequence[Launch]) -> list[Any]:
        """Submit every launch; one ObjectRef each, in order."""

    def adopt(self) -> list[Adopted]:
        """Tasks that a previous driver of this run left running (none for a driver-owned run)."""

    def release(self, keys: Sequence[str]) -> None:
        """These tasks' outcomes are committed."""

    def close(self) -> None:
        """The scheduler is done (finished, or stopped by Ctrl-C): tasks still running are abandoned."""


def _task_options(num_cpus: float, resources: dict[str, float]) -> dict[str, Any]:
    return {"num_cpus": num_cpus, **({"resources": dict(resources)} if resources else {})}


class DirectSubmitter:
    def __init__(self, task: Callable[..., Any], num_cpus: float, resources: dict[str, float]) -> None:
        import ray

        self._remote = ray.remote(max_retries=0)(task).options(**_task_options(num_cpus, resources))

    def submit(self, launches: Sequence[Launch]) -> list[Any]:
        return [self._remote.remote(*launch.args) for launch in launches]

    def adopt(self) -> list[Adopted]:
        return []

    def release(self, keys: Sequence[str]) -> None:
        pass

    def close(self) -> None:
        pass


class LauncherSubmitter:
    def __init__(self, launcher: Any, num_cpus: float, resources: dict[str, float]) -> None:
        self.launcher = launcher
        self._options = _task_options(num_cpus, resources)

    def submit(self, launches: Sequence[Launch]) -> list[Any]:
        import ray

        # One actor call per launch, fetched together: a dispatch round costs one round trip, not one per task.
        calls = [self.launcher.launch.remote(launch.key, launch.trial_ids, launch.model, self._options,
                                             *launch.args) for launch in launches]
        return [wrapped[0] for wrapped in ray.get(calls)] if calls else []

    def adopt(self) -> list[Adopted]:
        import ray

        held = ray.get(self.launcher.held.remote())
        return [Adopted(key, ids, model, refs[0]) for key, (ids, model, refs) in held.items()]

    def release(self, keys: Sequence[str]) -> None:
        if keys:
            self.launcher.release.remote(list(keys))   # fire and forget: the refs are only bookkeeping

    def close(self) -> None:
        import ray

        # Done or stopped on purpose: the launcher (and, with it, any task still running) goes. Only a driver
        # that dies without getting here leaves it, for the next driver to adopt.
        try:
            ray.kill(self.launcher)
        except Exception:  # noqa: BLE001 - already gone
            pass


class DemandSignal:
    """Tells the autoscaler what the ready trials need (`ray.autoscaler.sdk.request_resources`), so that the
    cluster grows for a wave of hops before its tasks queue and shrinks when chains wait; a request is sent only
    when the demand changed and at most once per `min_interval_s` (each is an RPC to the GCS)."""

    def __init__(self, bundle: dict[str, float], min_interval_s: float = 1.0,
                 request: Optional[Callable[..., Any]] = None) -> None:
        self.bundle = dict(bundle)
        self.min_interval_s = min_interval_s
        self._request = request
        self._last: Optional[int] = None
        self._last_at = float("-inf")
        self.sent: list[int] = []   # every demand sent, in order (progress and tests read it)

    def update(self, wanted: int, now: float) -> None:
        if wanted == self._last or now - self._last_at < self.min_interval_s:
            return
        self._send(wanted)
        self._last, self._last_at = wanted, now

    def clear(self) -> None:
        """No standing demand (a request persists until replaced: left set, it would keep nodes up)."""
        if self._last:
            self._send(0)
            self._last = 0

    def _send(self, wanted: int) -> None:
        request = self._request
        if request is None:
            from ray.autoscaler.sdk import request_resources as request
        request(bundles=[dict(self.bundle) for _ in range(wanted)])
        self.sent.append(wanted)
