"""Model-server health probes and restarts, off the scheduler's loop.

An attempt that ended with `error` (its model endpoint kept failing) is either the model's result or a casualty
of a server that went down; only a probe of the server tells which. A probe takes up to 90 s and a restart up to
30 min, and while either ran inside the loop, every model's dispatch and collection stood still. Here each runs on
a thread of its own: the loop hands over the error outcome (`hold`) and, each round, takes back verdicts (`poll`):
which held outcomes to keep (the server answered), which trials to run again (it did not), and which models'
servers came back. Only the model whose server is down waits; the others run on.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Optional

from ..records import Trial, TrialOutcome

log = logging.getLogger(__name__)

RESTART_RETRY_S = 10.0   # after a failed restart, wait this long before the next (a broken node must not spin)


@dataclass
class HealthNews:
    """What `poll` found since the last round."""

    keep: list[tuple[Trial, TrialOutcome]] = field(default_factory=list)    # the server answered: real results
    rerun: list[tuple[Trial, str]] = field(default_factory=list)            # (trial, why): the server was down
    went_down: list[str] = field(default_factory=list)                      # models now paused
    came_back: list[str] = field(default_factory=list)                      # models whose restart succeeded
    restart_failed: list[tuple[str, str]] = field(default_factory=list)     # (model, error)


class ModelHealth:
    """Probes and restarts for the servers of `services` (a `ModelServers`), each on a worker thread."""

    def __init__(self, services: Any, threads: int = 4) -> None:
        self.services = services
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="model-health")
        self._probes: dict[str, Future] = {}
        self._held: dict[str, list[tuple[Trial, TrialOutcome]]] = {}
        self._restarts: dict[str, Future] = {}
        self._retry_at: dict[str, float] = {}
        self.down: set[str] = set()          # models whose server is known down (their trials wait)

    def hold(self, trial: Trial, outcome: TrialOutcome) -> None:
        """An attempt of `trial` ended in `error`: keep it or rerun it once the model's server was probed."""
        model = trial.model
        self._held.setdefault(model, []).append((trial, outcome))
        if model not in self._probes and model not in self.down:
            self._probes[model] = self._pool.submit(self.services.healthy, model)

    @property
    def holding(self) -> bool:
        """Outcomes wait on a probe (the campaign is not over while they do)."""
        return bool(self._held)

    def poll(self, now: Optional[float] = None) -> HealthNews:
        now = time.monotonic() if now is None else now
        news = HealthNews()
        for model, probe in list(self._probes.items()):
            if not probe.done():
                continue
            del self._probes[model]
            try:
                healthy = bool(probe.result())
            except Exception as err:  # noqa: BLE001 - a probe that cannot even ask counts as down
                log.warning("health probe of %s failed: %s", model, err)
                healthy = False
            if healthy:
                news.keep.extend(self._held.pop(model, []))
            else:
                self.down.add(model)
                news.went_down.append(model)
        for model in list(self.down):
            # Everything held for a model that is down is a casualty, including what arrived after the probe.
            news.rerun.extend((trial, outcome.error or "llm_error") for trial, outcome in self._held.pop(model, []))
            restart = self._restarts.get(model)
            if restart is None:
                if now >= self._retry_at.get(model, 0.0):
                    log.warning("model server %s is down: restarting it (its trials wait)", model)
                    self._restarts[model] = self._pool.submit(self.services.restart, model)
                continue
            if not restart.done():
                continue
            del self._restarts[model]
            try:
                restart.result()
            except Exception as err:  # noqa: BLE001 - its trials stay queued; a later round tries again
                news.restart_failed.append((model, f"{type(err).__name__}: {err}"))
                self._retry_at[model] = now + RESTART_RETRY_S
                continue
            self.down.discard(model)
            news.came_back.append(model)
        return news

    def close(self) -> None:
        # Probes and restarts in progress finish on their own; the campaign does not wait for them.
        self._pool.shutdown(wait=False, cancel_futures=True)
