"""Where a hop is scheduled: the driver loop that runs a plan's trials on Ray and writes their outcomes.

Loop: dispatch ready trials as Ray tasks (bounded per model by its concurrency), collect finished ones with one
`ray.wait` over everything in flight, write outcomes to the store in batches, and only then release dependants —
a trial counts as done once it is written, so a killed driver loses at most the unwritten batch, which the next
run re-runs (it is still 'planned' in the store): nothing is lost, nothing duplicated.

Why `ray.wait` and not one asyncio await per ObjectRef: a synthetic campaign has 10^5 trials and the per-trial
cost of the driver is what bounds it; one wait over the in-flight set is O(in-flight) per round and keeps Ctrl-C,
batching and progress in one plain loop.

Faults: a task that raises (worker died, node lost, bug) is re-run up to `max_trial_retries` times, then stored as
`infra_error`; an attempt that ended with `llm_error` while its model server is down pauses that model, restarts
the server and re-runs the trial (bounded the same way); evaluator actors restart on their own (services.py).
"""
from __future__ import annotations

import heapq
import logging
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Protocol, Sequence

from .plan import Plan
from .runner import TrialContext, execute_trial
from .services import EvaluatorPool
from ..records import Trial, TrialOutcome

if TYPE_CHECKING:
    from ..models.roster import ModelSpec

log = logging.getLogger(__name__)


class OutcomeStore(Protocol):
    """What the scheduler needs of the run store (`mkb_ray.store.RunStore` is one)."""

    def done_ids(self) -> set[str]:
        """Trials whose outcome is committed."""

    def skill_text(self, trial_id: str) -> Optional[str]:
        """The SKILL.md a done trial wrote; None when it wrote none."""

    def write_outcomes(self, outcomes: Sequence[TrialOutcome]) -> None:
        """Commit a batch of outcomes, all or none."""

    def log_event(self, kind: str, trial_id: Optional[str] = None, **data: Any) -> None:
        """Append a scheduler event."""


class ModelServers(Protocol):
    """What the scheduler needs of the model servers (`mkb_ray.campaign.services.ModelServices` is one)."""

    def api_base(self, name: str) -> Optional[str]:
        """Where model `name` is served; None for provider APIs."""

    def healthy(self, name: str) -> bool:
        """Whether model `name`'s server answers."""

    def restart(self, name: str) -> str:
        """Start model `name`'s server afresh; returns its new api_base."""


@dataclass
class SchedulerSettings:
    max_trial_retries: int = 2
    flush_interval_s: float = 0.25      # longest an outcome waits in memory before it is written
    flush_max: int = 2000               # ... or this many outcomes
    synthetic_batch: int = 64           # synthetic trials per Ray task (one each for real trials)
    synthetic_inflight: int = 64        # synthetic tasks in flight
    wait_timeout_s: float = 0.05


@dataclass
class Progress:
    """What the progress display shows; updated by the scheduler."""

    total: int = 0
    done_before: int = 0
    done: int = 0
    failed: int = 0
    running: int = 0
    queued: int = 0
    retries: int = 0
    tokens: int = 0
    started_s: float = field(default_factory=time.monotonic)

    def eta_s(self) -> Optional[float]:
        elapsed = time.monotonic() - self.started_s
        if self.done == 0 or elapsed <= 0:
            return None
        remaining = self.total - self.done_before - self.done
        return remaining * elapsed / self.done


@dataclass
class RunResult:
    written: int
    interrupted: bool
    progress: Progress


@dataclass
class _Flight:
    trials: list[Trial]
    model: str


class Scheduler:
    """Runs the not-yet-done trials of `plan`, writing outcomes to `store` (a RunStore).

    services: the model servers (None: nothing to restart, e.g. synthetic runs); evaluator: handed to each trial
    task as it is (None: no real judging).
    """

    def __init__(self, plan: Plan, store: OutcomeStore, contexts: dict[str, TrialContext],
                 concurrency: dict[str, int], specs: Mapping[str, "ModelSpec"],
                 services: Optional[ModelServers] = None, evaluator: Optional[EvaluatorPool] = None,
                 settings: SchedulerSettings = SchedulerSettings(),
                 on_progress: Optional[Callable[[Progress], None]] = None,
                 task: Optional[Callable[..., list[TrialOutcome]]] = None) -> None:
        self.plan, self.store, self.contexts = plan, store, contexts
        self.concurrency, self.specs, self.services, self.evaluator = concurrency, specs, services, evaluator
        self.settings = settings
        self.on_progress = on_progress
        self.task = task or _execute_batch  # the Ray task body; tests inject faults through it
        self.synthetic = plan.synthetic
        # Synthetic draws are batched many to a Ray task (they cost ~0.3 ms each); trials that call a real judge or
        # model run one per task so they spread over evaluators and model replicas.
        self.batched = plan.synthetic and not any(c.real_judge for c in contexts.values())
        self._skills: dict[str, str] = {}      # SKILL.md of written trials whose dependants are not dispatched
        self._attempts: dict[str, int] = {}
        self._buffer: list[TrialOutcome] = []
        # Per model, ready trials by priority: the longest chain of work still hanging off a trial first (so a
        # 100-hop chain's next hop never waits behind one-off solo trials), then plan order.
        self._queues: dict[str, list[tuple[int, int, Trial]]] = {}
        self._tail = plan.graph.tail_lengths()   # by plan position
        self._running: dict[str, int] = {}
        self._flights: dict[Any, _Flight] = {}
        self._paused: set[str] = set()

    # -- dispatch ------------------------------------------------------------------------------------------------
    def _enqueue(self, trials: list[Trial]) -> None:
        index, tail = self.plan.graph.index, self._tail
        for trial in trials:
            position = index(trial.trial_id)
            heapq.heappush(self._queues.setdefault(trial.model, []), (-tail[position], position, trial))

    def _source_skill(self, trial: Trial) -> Optional[str]:
        if trial.skill_from is None:
            return None
        text = self._skills.get(trial.skill_from)
        if text is None:
            text = self.store.skill_text(trial.skill_from) or ""
        return text

    def _dispatch(self, remote: Any) -> None:
        for model, queue in self._queues.items():
            if model in self._paused:
                continue
            limit = self.settings.synthetic_inflight if self.batched else self.concurrency.get(model, 1)
            while queue and self._running.get(model, 0) < limit:
                size = min(self.settings.synthetic_batch, len(queue)) if self.batched else 1
                batch = [heapq.heappop(queue)[2] for _ in range(size)]
                skills = [self._source_skill(t) for t in batch]
                ctx = self.contexts[model]
                spec = self.specs.get(model)
                api_base = self.services.api_base(model) if self.services is not None else None
                ref = remote.remote(batch, skills, ctx, spec, api_base, self.evaluator)
                self._flights[ref] = _Flight(batch, model)
                self._running[model] = self._running.get(model, 0) + 1
                for t in batch:
                    self._attempts[t.trial_id] = self._attempts.get(t.trial_id, 0) + 1

    # -- results -------------------------------------------------------------------------------------------------
    def _collect(self, ref: Any, progress: Progress) -> list[Trial]:
        """Take one finished task; returns trials to run again."""
        import ray

        flight = self._flights.pop(ref)
        self._running[flight.model] -= 1
        try:
            outcomes: list[TrialOutcome] = ray.get(ref)
        except Exception as err:  # noqa: BLE001 - any task failure is retried, then stored as infra_error
            return self._failed(flight.trials, f"{type(err).__name__}: {str(err)[:2000]}", progress)
        retry: list[Trial] = []
        for trial, outcome in zip(flight.trials, outcomes):
            if self._model_went_down(trial, outcome):
                retry.extend(self._failed([trial], outcome.error or "llm_error", progress, kind="model_down"))
                continue
            self._keep(outcome, trial)
        return retry

    def _model_went_down(self, trial: Trial, outcome: TrialOutcome) -> bool:
        """An attempt that failed on its model while the model's server is down is not the model's result."""
        if outcome.status != "error" or self.services is None:
            return False
        if not self.services.healthy(trial.model):
            self.store.log_event("server_down", trial.trial_id, model=trial.model)
            self._paused.add(trial.model)
            return True
        return False

    def _failed(self, trials: list[Trial], error: str, progress: Progress, kind: str = "task_error") -> list[Trial]:
        retry = []
        for trial in trials:
            attempts = self._attempts.get(trial.trial_id, 1)
            if attempts <= self.settings.max_trial_retries:
                self.store.log_event("retry", trial.trial_id, attempt=attempts, cause=kind, error=error[:2000])
                progress.retries += 1
                retry.append(trial)
            else:
                self.store.log_event("infra_error", trial.trial_id, attempts=attempts, error=error[:2000])
                self._keep(TrialOutcome(trial_id=trial.trial_id, status="infra_error", record_json=None,
                                        artifacts={}, synthetic=self.synthetic, attempts=attempts,
                                        error=error[:4000]), trial)
        return retry

    def _keep(self, outcome: TrialOutcome, trial: Trial) -> None:
        attempts = self._attempts.get(trial.trial_id, 1)
        if outcome.attempts != attempts:
            outcome = replace(outcome, attempts=attempts)
        self._buffer.append(outcome)

    def _flush(self, done: set[str], progress: Progress) -> None:
        if not self._buffer:
            return
        batch, self._buffer = self._buffer, []
        self.store.write_outcomes(batch)
        for outcome in batch:
            tid = outcome.trial_id
            done.add(tid)
            self._attempts.pop(tid, None)
            progress.done += 1
            progress.tokens += outcome.tokens
            if outcome.status in ("error", "infra_error"):
                progress.failed += 1
            dependants = self.plan.newly_ready(tid, done)
            if dependants:
                self._skills[tid] = outcome.skill_md or ""
                self._enqueue(dependants)
        # Sources whose dependants have all been dispatched need no cached text any more.
        if len(self._skills) > 4096:
            queued = {t.skill_from for q in self._queues.values() for _, _, t in q if t.skill_from}
            self._skills = {k: v for k, v in self._skills.items() if k in queued}

    def _resume_paused(self) -> None:
        for model in list(self._paused):
            if self.services is None:
                self._paused.discard(model)
                continue
            log.warning("model server %s is down: restarting it (its trials wait)", model)
            try:
                self.services.restart(model)
                self.store.log_event("server_restart", None, model=model)
            except Exception as err:  # noqa: BLE001 - its trials stay queued; the next round tries again
                log.error("restarting model server %s failed: %s", model, err)
                continue
            self._paused.discard(model)

    def _round(self, remote: Any, done: set[str], progress: Progress, clock: "_Clock") -> None:
        """One pass of the loop: dispatch, collect what finished, flush, report."""
        import ray

        if self._paused:
            self._resume_paused()
        self._dispatch(remote)
        if self._flights:
            ready, _ = ray.wait(list(self._flights), num_returns=len(self._flights),
                                timeout=self.settings.wait_timeout_s, fetch_local=True)
            for ref in ready:
                self._enqueue(self._collect(ref, progress))
        now = time.monotonic()
        if (len(self._buffer) >= self.settings.flush_max or now - clock.last_flush >= self.settings.flush_interval_s
                or not self._flights):
            self._flush(done, progress)
            clock.last_flush = now
        if self.on_progress is not None and now - clock.last_report >= 0.5:
            progress.running = sum(len(f.trials) for f in self._flights.values())
            progress.queued = sum(len(q) for q in self._queues.values())
            self.on_progress(progress)
            clock.last_report = now
        if not self._flights and not self._buffer and any(self._queues.values()) and \
                all(m in self._paused for m, q in self._queues.items() if q):
            time.sleep(1.0)  # every queued model is paused on a server restart that failed

    # -- the loop ------------------------------------------------------------------------------------------------
    def run(self) -> RunResult:
        import ray

        done = self.store.done_ids()
        progress = Progress(total=len(self.plan), done_before=sum(1 for t in self.plan if t.trial_id in done))
        self._enqueue(self.plan.ready(done))
        remote = ray.remote(num_cpus=1 if self.batched else 0, max_retries=0)(self.task)
        clock = _Clock(last_flush=time.monotonic())
        interrupted = False
        self.store.log_event("started", None, pending=progress.total - progress.done_before)
        stop = threading.Event()
        try:
            with _first_ctrl_c_sets(stop):
                while (self._flights or self._buffer or any(self._queues.values())) and not stop.is_set():
                    self._round(remote, done, progress, clock)
        except KeyboardInterrupt:  # a second Ctrl-C while the first one's stop was under way
            stop.set()
        if stop.is_set():
            interrupted = True
            # No ray.cancel: cancelling a task while its reply is in flight trips a fatal check in Ray's core
            # worker (ray-project/ray#54846), which killed the driver before it could say "interrupted". The
            # running tasks belong to this driver, so Ray kills their workers when it disconnects.
            log.warning("interrupted: %d running task(s) are dropped; finished outcomes are kept",
                        sum(len(f.trials) for f in self._flights.values()))
            self._flights.clear()
            self._flush(done, progress)
            self.store.log_event("interrupted", None, done=progress.done)
        progress.running = progress.queued = 0
        if self.on_progress is not None:
            self.on_progress(progress)
        return RunResult(written=progress.done, interrupted=interrupted, progress=progress)


@dataclass
class _Clock:
    """When the loop last flushed outcomes to the store and last reported progress (monotonic seconds)."""
    last_flush: float
    last_report: float = 0.0


@contextmanager
def _first_ctrl_c_sets(stop: threading.Event):
    """While the loop runs, the first SIGINT only sets `stop`; the loop then ends between two rounds, so no
    outcome is half-collected and no store write is cut. A second SIGINT raises KeyboardInterrupt as usual.
    Off the main thread (a scheduler run from a test or a notebook thread) signals cannot be caught: no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigint(signum, frame):
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _execute_batch(trials: list[Trial], skills: list[Optional[str]], ctx: TrialContext,
                   spec: Optional["ModelSpec"], api_base: Optional[str],
                   evaluator: Optional[EvaluatorPool]) -> list[TrialOutcome]:
    """The Ray task: run trials one after another (synthetic batches; real trials come one per task)."""
    return [execute_trial(t, s, ctx, spec, api_base, evaluator) for t, s in zip(trials, skills)]
