"""Where a hop is scheduled: the driver loop that runs a plan's trials on Ray and writes their outcomes.

Loop: dispatch ready trials as Ray tasks (bounded per model by its concurrency, and by the evaluators' capacity),
collect finished ones with one `ray.wait` over everything in flight, write outcomes to the store in batches, and
only then release dependants — a trial counts as done once it is written, so a killed driver loses at most the
unwritten batch, which the next run re-runs (it is still 'planned' in the store): nothing is lost, nothing
duplicated. On a cluster the tasks outlive the driver (submit.py, spool.py): the next driver collects what
finished meanwhile and adopts what still runs.

Why `ray.wait` and not one asyncio await per ObjectRef: a synthetic campaign has 10^5 trials and the per-trial
cost of the driver is what bounds it; one wait over the in-flight set is O(in-flight) per round and keeps Ctrl-C,
batching and progress in one plain loop.

Faults: a task that raises (worker died, node lost, bug) is re-run up to `max_trial_retries` times, then stored as
`infra_error`; an attempt that ended with `error` has its model's server probed, off the loop (model_health.py):
answered, the error is the model's result; down, that model alone pauses while its server restarts, and the trial
runs again (bounded the same way); evaluator actors restart on their own (services.py).
"""
from __future__ import annotations

import heapq
import logging
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Union

from .handoff import HandOffBuilder, needs_hand_off
from .model_health import ModelHealth
from .placement import Placement
from .protocols import ModelServers, OutcomeStore
from .plan import Plan
from .trial_task import TrialContext, execute_batch
from .services import EvaluatorPool
from .spool import DurableParts, ingest_spool, spool_key
from .submit import DemandSignal, DirectSubmitter, LauncherSubmitter, Launch, Submitter
from ..records import HandOff, Trial, TrialOutcome

if TYPE_CHECKING:
    from ..models.roster import ModelSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelLane:
    """What the scheduler holds of one model of the campaign (`campaign.build.model_lanes` makes them)."""

    context: TrialContext                # what its trials' tasks are handed
    concurrency: int = 1                 # its trial tasks in flight at most (synthetic batches: synthetic_inflight)
    spec: Optional["ModelSpec"] = None   # its roster entry (None: synthetic runs and tests need none)


@dataclass(frozen=True)  # the Scheduler's default instance is shared
class SchedulerSettings:
    max_trial_retries: int = 2
    flush_interval_s: float = 0.25      # longest an outcome waits in memory before it is written
    flush_max: int = 2000               # ... or this many outcomes
    synthetic_batch: int = 64           # synthetic trials per Ray task (one each for real trials)
    synthetic_inflight: int = 64        # synthetic tasks in flight
    wait_timeout_s: float = 0.05
    judged_inflight: Optional[int] = None   # trial tasks in flight at most, for the evaluators' capacity


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
    key: str            # the task's key: its spool file and its entry in the launcher


class Scheduler:
    """Runs the not-yet-done trials of `plan`, writing outcomes to `store` (a RunStore).

    models: each model's lane (every model of the plan needs one). services: the model servers (None: nothing
    to restart, e.g. synthetic runs); evaluator: handed to each trial task as it is (None: no real judging). A
    cluster run also passes `durable` (the run's launcher: tasks outlive this driver and a restarted driver adopts
    them; its spool: the outcomes finished tasks left, ingested before anything is planned) and a `roles`
    placement (trial tasks ask for the agent group's resource, and the autoscaler is told what the ready trials
    need). `campaign.build.build_scheduler` wires one from a config.
    """

    def __init__(self, plan: Plan, store: OutcomeStore, models: Mapping[str, ModelLane],
                 services: Optional[ModelServers] = None, evaluator: Optional[EvaluatorPool] = None,
                 settings: SchedulerSettings = SchedulerSettings(),
                 on_progress: Optional[Callable[[Progress], None]] = None,
                 task: Optional[Callable[..., list[TrialOutcome]]] = None, durable: Optional[DurableParts] = None,
                 placement: Placement = Placement(), hand_offs: Optional[HandOffBuilder] = None) -> None:
        self.plan, self.store, self.models = plan, store, models
        self.services, self.evaluator = services, evaluator
        self.settings = settings
        self.on_progress = on_progress
        self.task = task or execute_batch  # the Ray task body; tests inject faults through it
        self.durable, self.placement = durable, placement
        self.hand_offs = hand_offs   # intervention trials' hand-offs (None: made on first need, no ablation specs)
        self.spool = durable.spool if durable is not None else None
        self.synthetic = plan.synthetic
        # Synthetic draws are batched many to a Ray task (they cost ~0.3 ms each); trials that call a real judge or
        # model run one per task so they spread over evaluators and model replicas.
        self.batched = plan.synthetic and not any(lane.context.real_judge for lane in models.values())
        self._skills: dict[str, str] = {}      # SKILL.md of written trials whose dependants are not dispatched
        self._attempts: dict[str, int] = {}
        self._buffer: list[TrialOutcome] = []
        # Per model, ready trials by priority: the longest chain of work still hanging off a trial first (so a
        # 100-hop chain's next hop never waits behind one-off solo trials), then plan order.
        self._queues: dict[str, list[tuple[int, int, Trial]]] = {}
        self._tail = plan.graph.tail_lengths()   # by plan position
        self._running: dict[str, int] = {}
        self._flights: dict[Any, _Flight] = {}
        # Probes and restarts of model servers run on threads of their own (model_health.py): a slow probe or a
        # 30-minute restart pauses only its model's trials.
        self._health = ModelHealth(services) if services is not None else None
        self._collected: list[_Flight] = []   # flights whose outcomes wait in the buffer for the next flush

    # -- dispatch ------------------------------------------------------------------------------------------------
    def _enqueue(self, trials: list[Trial]) -> None:
        index, tail = self.plan.graph.index, self._tail
        for trial in trials:
            position = index(trial.trial_id)
            heapq.heappush(self._queues.setdefault(trial.model, []), (-tail[position], position, trial))

    def _source_skill(self, trial: Trial) -> Optional[Union[str, HandOff]]:
        """What the trial reads: its source's SKILL.md, or for an intervention trial (or a gated chain hop) the
        hand-off made from it (campaign/handoff.py)."""
        text: Optional[str] = None
        if trial.skill_from is not None:
            text = self._skills.get(trial.skill_from)
            if text is None:
                text = self.store.skill_text(trial.skill_from) or ""
        if needs_hand_off(trial):
            if self.hand_offs is None:
                self.hand_offs = HandOffBuilder(self.store, {})  # type: ignore[arg-type]
            return self.hand_offs.build(trial, text or "")
        return text

    def _limit(self, model: str) -> int:
        """Tasks of this model in flight at most."""
        if self.batched:
            return self.settings.synthetic_inflight
        lane = self.models.get(model)
        return lane.concurrency if lane is not None else 1

    def _judges_full(self) -> bool:
        bound = self.settings.judged_inflight
        return bound is not None and not self.batched and sum(self._running.values()) >= bound

    def _dispatch(self, submitter: Submitter) -> None:
        flights: list[_Flight] = []
        launches: list[Launch] = []
        for model, queue in self._queues.items():
            if model in self._paused:
                continue
            while queue and self._running.get(model, 0) < self._limit(model) and not self._judges_full():
                size = min(self.settings.synthetic_batch, len(queue)) if self.batched else 1
                batch = [heapq.heappop(queue)[2] for _ in range(size)]
                skills = [self._source_skill(t) for t in batch]
                lane = self.models[model]
                api_base = self.services.api_base(model) if self.services is not None else None
                ids = [t.trial_id for t in batch]
                flights.append(_Flight(batch, model, spool_key(ids)))
                launches.append(Launch(flights[-1].key, ids, model, (batch, skills, lane.context, lane.spec,
                                                                     api_base, self.evaluator)))
                self._running[model] = self._running.get(model, 0) + 1
                for t in batch:
                    self._attempts[t.trial_id] = self._attempts.get(t.trial_id, 0) + 1
        for flight, ref in zip(flights, submitter.submit(launches)):
            self._flights[ref] = flight

    def _adopt(self, submitter: Submitter, done: set[str]) -> set[str]:
        """Wait on the tasks a previous driver of this run left running instead of submitting them again;
        returns their trial ids. A task some of whose trials are already stored is let go (its trials that are
        not are queued afresh)."""
        adopted: set[str] = set()
        stale: list[str] = []
        for task in submitter.adopt():
            if any(t in done or t not in self.plan for t in task.trial_ids):
                stale.append(task.key)
                continue
            self._flights[task.ref] = _Flight([self.plan.by_id(t) for t in task.trial_ids], task.model, task.key)
            self._running[task.model] = self._running.get(task.model, 0) + 1
            for tid in task.trial_ids:
                self._attempts[tid] = 1
            adopted.update(task.trial_ids)
        submitter.release(stale)
        if adopted or stale:
            self.store.log_event("adopted", None, trials=len(adopted), tasks=len(self._flights),
                                 let_go=len(stale))
        return adopted

    def _demand(self) -> int:
        """Trial tasks the ready and running work could use now (each model capped by its limit)."""
        total = 0
        for model in set(self._queues) | set(self._running):
            queued = len(self._queues.get(model, ()))
            tasks = -(-queued // self.settings.synthetic_batch) if self.batched else queued
            total += min(self._limit(model), self._running.get(model, 0) + tasks)
        bound = self.settings.judged_inflight
        return total if bound is None or self.batched else min(total, bound)

    # -- results -------------------------------------------------------------------------------------------------
    def _collect(self, ref: Any, progress: Progress) -> list[Trial]:
        """Take one finished task; returns trials to run again (a crashed task's; attempt errors go to the
        model-health probes, which answer in a later round)."""
        import ray

        flight = self._flights.pop(ref)
        self._running[flight.model] -= 1
        try:
            outcomes: list[TrialOutcome] = ray.get(ref)
        except Exception as err:  # noqa: BLE001 - any task failure is retried, then stored as infra_error
            # Not released: a retry re-submits under the same key, and the launcher holds that task instead.
            return self._failed(flight.trials, f"{type(err).__name__}: {str(err)[:2000]}", progress)
        self._collected.append(flight)
        for trial, outcome in zip(flight.trials, outcomes):
            if outcome.status == "error" and self._health is not None:
                self._health.hold(trial, outcome)   # the model's result, or its server's fault: a probe decides
                continue
            self._keep(outcome, trial)
        return []

    @property
    def _paused(self) -> set[str]:
        """Models whose server is down: their trials wait for its restart."""
        return self._health.down if self._health is not None else set()

    def _apply_health(self, progress: Progress) -> None:
        """What the model-server probes and restarts found since the last round."""
        news = self._health.poll() if self._health is not None else None
        if news is None:
            return
        for model in news.went_down:
            self.store.log_event("server_down", None, model=model)
        for trial, outcome in news.keep:
            self._keep(outcome, trial)
        for trial, why in news.rerun:
            self._enqueue(self._failed([trial], why, progress, kind="model_down"))
        for model in news.came_back:
            self.store.log_event("server_restart", None, model=model)
        for model, error in news.restart_failed:
            log.error("restarting model server %s failed: %s", model, error)

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

    def _flush(self, done: set[str], progress: Progress, submitter: Submitter) -> None:
        if not self._buffer and not self._collected:
            return
        batch, self._buffer = self._buffer, []
        collected, self._collected = self._collected, []
        self.store.write_outcomes(batch)
        # Committed: the tasks' spool files and the launcher's refs are no longer the only copy.
        if self.spool is not None:
            for flight in collected:
                self.spool.remove([t.trial_id for t in flight.trials])
        submitter.release([flight.key for flight in collected])
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

    def _round(self, submitter: Submitter, done: set[str], progress: Progress, clock: "_Clock",
               demand: Optional[DemandSignal]) -> None:
        """One pass of the loop: dispatch, collect what finished, flush, report, tell the autoscaler."""
        import ray

        self._apply_health(progress)
        self._dispatch(submitter)
        if self._flights:
            ready, _ = ray.wait(list(self._flights), num_returns=len(self._flights),
                                timeout=self.settings.wait_timeout_s, fetch_local=True)
            for ref in ready:
                self._enqueue(self._collect(ref, progress))
        now = time.monotonic()
        if (len(self._buffer) >= self.settings.flush_max or now - clock.last_flush >= self.settings.flush_interval_s
                or not self._flights):
            self._flush(done, progress, submitter)
            clock.last_flush = now
        if self.on_progress is not None and now - clock.last_report >= 0.5:
            progress.running = sum(len(f.trials) for f in self._flights.values())
            progress.queued = sum(len(q) for q in self._queues.values())
            self.on_progress(progress)
            clock.last_report = now
        if demand is not None:
            demand.update(self._demand(), now)
        if not self._flights and not self._buffer and any(self._queues.values()) and \
                all(m in self._paused for m, q in self._queues.items() if q):
            time.sleep(0.2)  # every queued model waits on its server's restart

    def _held_for_health(self) -> bool:
        return self._health is not None and self._health.holding

    def _submitter(self) -> Submitter:
        num_cpus = 1 if self.batched else 0
        if self.durable is not None:
            return LauncherSubmitter(self.durable.launcher, num_cpus, self.placement.trial)
        return DirectSubmitter(self.task, num_cpus, self.placement.trial)

    def _demand_signal(self) -> Optional[DemandSignal]:
        if self.placement.mode != "roles":
            return None
        return DemandSignal({**self.placement.trial, **({"CPU": 1.0} if self.batched else {})})

    # -- the loop ------------------------------------------------------------------------------------------------
    def run(self) -> RunResult:
        if self.spool is not None:
            ingested = ingest_spool(self.spool, self.store, self.plan)
            if ingested:
                log.info("collected %d outcome(s) that finished after the last driver stopped", ingested)
        done = self.store.done_ids()
        progress = Progress(total=len(self.plan), done_before=sum(1 for t in self.plan if t.trial_id in done))
        submitter = self._submitter()
        adopted = self._adopt(submitter, done)
        self._enqueue([t for t in self.plan.ready(done) if t.trial_id not in adopted])
        demand = self._demand_signal()
        clock = _Clock(last_flush=time.monotonic())
        interrupted = False
        self.store.log_event("started", None, pending=progress.total - progress.done_before)
        stop = threading.Event()
        try:
            with _first_ctrl_c_sets(stop):
                while (self._flights or self._buffer or any(self._queues.values()) or self._held_for_health()) \
                        and not stop.is_set():
                    self._round(submitter, done, progress, clock, demand)
        except KeyboardInterrupt:  # a second Ctrl-C while the first one's stop was under way
            stop.set()
        if stop.is_set():
            interrupted = True
            # No ray.cancel: cancelling a task while its reply is in flight trips a fatal check in Ray's core
            # worker (ray-project/ray#54846), which killed the driver before it could say "interrupted". The
            # running tasks go with their owner: this driver when it disconnects, or the launcher, killed below.
            log.warning("interrupted: %d running task(s) are dropped; finished outcomes are kept",
                        sum(len(f.trials) for f in self._flights.values()))
            self._flights.clear()
            self._flush(done, progress, submitter)
            self.store.log_event("interrupted", None, done=progress.done)
        if demand is not None:
            demand.clear()
        submitter.close()
        if self._health is not None:
            self._health.close()
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
