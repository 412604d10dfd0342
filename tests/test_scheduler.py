"""The scheduler's fault handling, on a real local Ray with the real store: crashing trial tasks are retried and
then stored as infra_error; an attempt that failed while its model server was down pauses the model, restarts
the server and runs again; dependants start only once their source is written.

The trial task is injected (the scheduler's `task` seam) so that faults happen at exactly the chosen trial and
attempt; outcomes are real synthetic draws. The real model-server restart is tested in test_model_restart.py."""
from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

from mkb_ray.campaign.plan import Plan
from mkb_ray.campaign.trial_task import TrialContext
from mkb_ray.campaign.reconcile import record_plan
from mkb_ray.campaign.scheduler import ModelLane, Scheduler, SchedulerSettings
from mkb_ray.records import Trial
from mkb_ray.store.sqlite_store import RunStore
from mkb_ray.synthetic import SyntheticSpec, synthetic_outcome

MODEL = "m"


def _chain(problem: str, hops: int) -> list[Trial]:
    trials = []
    for hop in range(hops):
        tid = f"{MODEL}/{problem}/chain0/h{hop}"
        trials.append(Trial(trial_id=tid, model=MODEL, problem_id=problem, dsl="tirx" if hop % 2 else "cutedsl",
                            target="gpu", arm="skill" if hop else "solo", kind="chain_hop", chain=0, hop=hop,
                            skill_from=trials[-1].trial_id if hop else None, config_hash="c", problem_hash="p",
                            template_hash="t"))
    return trials


def _task_failing(marks: Path, failures: dict[str, int], error_status: bool = False):
    """A trial task whose trials in `failures` fail that many times first: by raising (a crashed task), or, with
    `error_status`, by ending as an attempt error (what a dead model server produces)."""
    # Everything the task uses is defined here or importable from mkb_ray: Ray workers cannot import this module.
    def attempt_number(trial_id: str) -> int:
        """How many times this trial's task has run (across Ray worker processes), this run included."""
        path = marks / trial_id.replace("/", "_")
        count = int(path.read_text()) + 1 if path.exists() else 1
        path.write_text(str(count))
        return count

    def task(trials, skills, ctx, spec, api_base, evaluator):
        outcomes = []
        for trial, skill in zip(trials, skills):
            n = attempt_number(trial.trial_id)
            fail = n <= failures.get(trial.trial_id, 0)
            if fail and not error_status:
                raise RuntimeError(f"worker died running {trial.trial_id}")
            # An attempt error is drawn as synthetic mode draws one: the model endpoint failing (llm_error).
            spec = SyntheticSpec(llm_error_prob=1.0) if fail else SyntheticSpec()
            outcomes.append(synthetic_outcome(trial, skill, spec))
        return outcomes
    return task


def _scheduler(plan: Plan, store: RunStore, task, services=None, retries: int = 2) -> Scheduler:
    ctx = TrialContext(budget_json="{}", agent="chat", synthetic_json=SyntheticSpec().model_dump_json())
    return Scheduler(plan, store, {MODEL: ModelLane(ctx, concurrency=2)}, services=services,
                     settings=SchedulerSettings(max_trial_retries=retries, synthetic_batch=1), task=task)


def test_a_crashing_trial_is_retried_then_stored_as_infra_error(tmp_path, local_ray):
    trials = _chain("synthetic/attention_0", 3) + _chain("synthetic/moe_0", 2)
    plan = Plan(trials, synthetic=True)
    flaky, broken = trials[1].trial_id, trials[3].trial_id
    marks = tmp_path / "marks"
    marks.mkdir()
    with RunStore(tmp_path / "run") as store:
        record_plan(store, plan.trials)
        result = _scheduler(plan, store, _task_failing(marks, {flaky: 2, broken: 99})).run()
        rows = {r.trial_id: r for r in store.trial_rows()}
        retries = [e.trial_id for e in store.events("retry")]
        infra = [e.trial_id for e in store.events("infra_error")]
    assert result.written == len(trials) and not result.interrupted
    assert rows[flaky].status == "completed" and rows[flaky].attempts == 3, (rows[flaky].error, rows[flaky].attempts)
    assert rows[broken].status == "infra_error" and rows[broken].attempts == 3 and "worker died" in rows[broken].error
    assert retries.count(flaky) == 2 and retries.count(broken) == 2 and infra == [broken]
    # The hop after the broken one still ran: with no SKILL.md to read, it is skipped, not lost.
    assert rows[trials[4].trial_id].status == "skipped"
    assert all(rows[t.trial_id].status == "completed" for t in trials[:3])


class _FlakyServices:
    """Stands in for ModelServices: the model's server is down until restarted once."""

    def __init__(self) -> None:
        self.down = True
        self.restarts = 0

    def api_base(self, name: str) -> str:
        return "http://127.0.0.1:9/v1"

    def healthy(self, name: str) -> bool:
        return not self.down

    def restart(self, name: str) -> str:
        self.restarts += 1
        self.down = False
        return self.api_base(name)


def test_an_attempt_failed_by_a_dead_model_server_pauses_restarts_and_reruns(tmp_path, local_ray):
    trials = _chain("synthetic/mlp_norm_0", 3)
    plan = Plan(trials, synthetic=True)
    victim = trials[1].trial_id
    marks = tmp_path / "marks"
    marks.mkdir()
    services = _FlakyServices()
    with RunStore(tmp_path / "run") as store:
        record_plan(store, plan.trials)
        task = _task_failing(marks, {victim: 1}, error_status=True)
        result = _scheduler(plan, store, task, services=services).run()
        rows = {r.trial_id: r for r in store.trial_rows()}
        kinds = [e.kind for e in store.events()]
    assert result.written == 3
    assert services.restarts == 1
    assert rows[victim].status == "completed" and rows[victim].attempts == 2
    assert "server_down" in kinds and "server_restart" in kinds
    assert kinds.index("server_down") < kinds.index("server_restart")


def test_an_attempt_error_with_a_healthy_server_is_the_models_result(tmp_path, local_ray):
    """An error outcome while the server answers is stored as it is (not retried): it is the attempt's result."""
    trials = _chain("synthetic/moe_1", 1)
    plan = Plan(trials, synthetic=True)
    services = _FlakyServices()
    services.down = False
    marks = tmp_path / "marks"
    marks.mkdir()
    with RunStore(tmp_path / "run") as store:
        record_plan(store, plan.trials)
        task = _task_failing(marks, {trials[0].trial_id: 1}, error_status=True)
        _scheduler(plan, store, task, services=services).run()
        row = store.trial(trials[0].trial_id)
    assert row.status == "error" and row.attempts == 1 and services.restarts == 0


def _task_checking_sources(store_file: Path, violations: Path):
    """A trial task that notes every trial dispatched before its source's outcome was committed to the store."""
    def task(trials, skills, ctx, spec, api_base, evaluator):
        import sqlite3

        for trial in trials:
            if trial.skill_from:
                with sqlite3.connect(f"file:{store_file}?mode=ro", uri=True) as conn:
                    (status,) = conn.execute("SELECT status FROM trials WHERE trial_id = ?",
                                             (trial.skill_from,)).fetchone()
                if status == "planned":
                    (violations / trial.trial_id.replace("/", "_")).write_text(status)
        return [synthetic_outcome(t, s, SyntheticSpec()) for t, s in zip(trials, skills)]
    return task


def test_dependants_start_only_after_their_source_is_written(tmp_path, local_ray):
    trials = _chain("synthetic/kv_cache_0", 6) + _chain("synthetic/kv_cache_1", 6)
    plan = Plan(trials, synthetic=True)
    violations = tmp_path / "violations"
    violations.mkdir()
    with RunStore(tmp_path / "run") as store:
        record_plan(store, plan.trials)
        _scheduler(plan, store, _task_checking_sources(tmp_path / "run" / "store.sqlite", violations)).run()
        skills = [store.skill_text(t.trial_id) for t in trials]
        statuses = {r.status for r in store.trial_rows()}
    assert statuses == {"completed"}
    assert not list(violations.iterdir()), "a hop ran before its source was written"
    # Each hop's SKILL.md evolved from its parent's claims (synthetic ground truth names the parent claim ids).
    assert all(skills) and all("parent:h" in s for s in skills[1:6] + skills[7:])


def test_first_ctrl_c_asks_the_loop_to_stop_and_a_second_one_raises():
    """The loop ends between two rounds on the first SIGINT, so no outcome is half-collected and no store write
    is cut (and no ray.cancel races a task's reply); a second SIGINT is the usual hard KeyboardInterrupt."""
    import os
    import signal
    import threading

    import pytest

    from mkb_ray.campaign.scheduler import _first_ctrl_c_sets

    stop = threading.Event()
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with _first_ctrl_c_sets(stop):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs at the next bytecode boundary
                if stop.is_set():
                    break
            assert stop.is_set()
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10**6):
                pass
    assert signal.getsignal(signal.SIGINT) is before


class _RecordingSubmitter:
    """Stands in for the Ray boundary in dispatch-only tests (the real launcher and Ray: test_fake_cluster.py):
    records what the scheduler submits, and hands back what a previous driver 'left running'."""

    def __init__(self, left_running=()):
        self.submitted, self.released, self.left_running = [], [], list(left_running)

    def submit(self, launches):
        self.submitted.extend(launches)
        return [object() for _ in launches]

    def adopt(self):
        return self.left_running

    def release(self, keys):
        self.released.extend(keys)


def _solo_trials(n: int) -> list[Trial]:
    return [Trial(trial_id=f"{MODEL}/synthetic/moe_{i}/r0/solo_tirx", model=MODEL, problem_id=f"synthetic/moe_{i}",
                  dsl="tirx", target="cpu", arm="solo", kind="benchmark", config_hash="c", problem_hash="p",
                  template_hash="t") for i in range(n)]


def test_dispatch_is_bounded_by_the_evaluators_capacity_as_well_as_the_models(tmp_path):
    plan = Plan(_solo_trials(6), synthetic=True)
    ctx = TrialContext(budget_json="{}", agent="chat", synthetic_json=SyntheticSpec().model_dump_json(),
                       real_judge=True)   # a real judge: one trial per task, each needing an evaluator slot
    with RunStore(tmp_path / "run") as store:
        record_plan(store, plan.trials)
        scheduler = Scheduler(plan, store, {MODEL: ModelLane(ctx, concurrency=5)},
                              settings=SchedulerSettings(judged_inflight=2))
        scheduler._enqueue(plan.ready(set()))
        submitter = _RecordingSubmitter()
        scheduler._dispatch(submitter)
        assert len(submitter.submitted) == 2 and scheduler._demand() == 2
        unbounded = Scheduler(plan, store, {MODEL: ModelLane(ctx, concurrency=5)})
        unbounded._enqueue(plan.ready(set()))
        unbounded._dispatch(_RecordingSubmitter())
        assert len(unbounded._flights) == 5 and unbounded._demand() == 5   # the model's concurrency alone


def test_a_restarted_driver_adopts_running_tasks_and_lets_go_of_half_stored_ones(tmp_path):
    from mkb_ray.campaign.spool import spool_key
    from mkb_ray.campaign.submit import Adopted
    from mkb_ray.synthetic import synthetic_outcome

    trials = _solo_trials(4)
    plan = Plan(trials, synthetic=True)
    ctx = TrialContext(budget_json="{}", agent="chat", synthetic_json=SyntheticSpec().model_dump_json(),
                       real_judge=True)
    ids = [t.trial_id for t in trials]
    running = Adopted(spool_key(ids[:1]), ids[:1], MODEL, object())
    half_stored = Adopted(spool_key(ids[1:3]), ids[1:3], MODEL, object())
    with RunStore(tmp_path / "run") as store:
        record_plan(store, plan.trials)
        store.write_outcomes([synthetic_outcome(trials[1], None, SyntheticSpec())])
        scheduler = Scheduler(plan, store, {MODEL: ModelLane(ctx, concurrency=4)})
        submitter = _RecordingSubmitter([running, half_stored])
        done = store.done_ids()
        adopted = scheduler._adopt(submitter, done)
        assert adopted == {ids[0]}
        assert submitter.released == [half_stored.key]
        assert [f.trials for f in scheduler._flights.values()] == [[trials[0]]]
        [event] = store.events("adopted")
        assert event.data == {"trials": 1, "tasks": 1, "let_go": 1}
        # What is queued afresh: neither the adopted trial nor the stored one.
        scheduler._enqueue([t for t in plan.ready(done) if t.trial_id not in adopted])
        scheduler._dispatch(submitter)
        assert sorted(launch.trial_ids[0] for launch in submitter.submitted) == [ids[2], ids[3]]


class _SlowProbeServices(_FlakyServices):
    """Model "slow" has a server whose health probe hangs until `release` is set (at most `probe_s`) and then reports
    it down; "fast" is fine. The probe's start is marked by the file `started` (Ray workers can see it)."""

    def __init__(self, release: threading.Event, started: Path, probe_s: float = 60.0) -> None:
        super().__init__()
        self.release, self.started, self.probe_s = release, started, probe_s
        self.probe_started_at = None
        self.probe_ended_at = None

    def healthy(self, name: str) -> bool:
        if name == "slow" and self.down:
            self.probe_started_at = time.monotonic()
            self.started.touch()
            self.release.wait(self.probe_s)
            self.probe_ended_at = time.monotonic()
            return False
        return True


def _task_waiting_for(started: Path, task, model: str = "fast", timeout_s: float = 60.0):
    """`task`, whose trials of `model` start only once the file `started` exists (at most `timeout_s` later)."""
    def waiting(trials, skills, ctx, spec, api_base, evaluator):
        import time

        if any(t.model == model for t in trials):
            deadline = time.monotonic() + timeout_s
            while not started.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        return task(trials, skills, ctx, spec, api_base, evaluator)
    return waiting


def test_a_slow_health_probe_pauses_only_its_own_model(tmp_path, local_ray):
    """The probe runs off the loop: while it hangs for one model, the other model's trials finish.

    No timing: the fast model's trials run only once the slow probe has started, and the probe hangs until every
    one of them is stored. Were the fast model held up by the probe, none would be stored while it hangs: the probe
    would give up after 60 s and the fast trials would be stored after it ended."""
    slow = [replace(t, trial_id=t.trial_id.replace(MODEL, "slow", 1), model="slow",
                    skill_from=t.skill_from.replace(MODEL, "slow", 1) if t.skill_from else None)
            for t in _chain("synthetic/moe_2", 2)]
    fast = [replace(t, trial_id=t.trial_id.replace(MODEL, "fast", 1), model="fast",
                    skill_from=t.skill_from.replace(MODEL, "fast", 1) if t.skill_from else None)
            for t in _chain("synthetic/moe_3", 6)]
    plan = Plan(slow + fast, synthetic=True)
    marks = tmp_path / "marks"
    marks.mkdir()
    fast_stored = threading.Event()
    services = _SlowProbeServices(fast_stored, tmp_path / "probe_started")
    ctx = TrialContext(budget_json="{}", agent="chat", synthetic_json=SyntheticSpec().model_dump_json())
    with RunStore(tmp_path / "run") as store:
        record_plan(store, plan.trials)
        task = _task_waiting_for(tmp_path / "probe_started",
                                 _task_failing(marks, {slow[0].trial_id: 1}, error_status=True))
        scheduler = Scheduler(plan, store, {"slow": ModelLane(ctx), "fast": ModelLane(ctx)},
                              services=services, settings=SchedulerSettings(synthetic_batch=1), task=task)
        finished_at = {}
        scheduler.on_progress = lambda p: None
        original_flush = scheduler._flush

        def flush_noting_times(done, progress, submitter):
            before = set(done)
            original_flush(done, progress, submitter)
            for tid in set(done) - before:
                finished_at[tid] = time.monotonic()
            if all(t.trial_id in finished_at for t in fast):
                fast_stored.set()
        scheduler._flush = flush_noting_times
        result = scheduler.run()
        rows = {r.trial_id: r for r in store.trial_rows()}
    assert result.written == len(plan)
    assert services.restarts == 1 and rows[slow[0].trial_id].attempts == 2
    assert rows[slow[0].trial_id].status == "completed"
    # Every one of the fast model's hops (a chain: one after another) was stored before the slow probe ended.
    assert services.probe_ended_at is not None
    assert all(finished_at[t.trial_id] > services.probe_started_at for t in fast), \
        "a fast trial was stored before the slow probe began: the test proves nothing"
    assert all(finished_at[t.trial_id] < services.probe_ended_at for t in fast), \
        "the fast model waited on the slow model's health probe"
