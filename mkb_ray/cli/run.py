"""`mkb run CONFIG`: plan a campaign, sync the plan with the run's store, run what is missing, summarise.

Resumable by construction: trial ids are deterministic and the store knows which are written, so running the
same command again after a crash, a kill or Ctrl-C runs only the trials that were not written. Trials whose
problem, templates or attempt config changed since they were stored are reported stale and kept as they are,
unless `--rerun-stale`. That re-runs them together with their finished dependants — the skill arms and later chain
hops that read a stale trial's SKILL.md, directly or down a chain, were conditioned on a text the rerun replaces —
and logs each reset in the store as a `rerun_stale` or `rerun_dependant` event. Without it, the warning says how
many finished dependants hang off the stale trials. Exit codes: 0 all trials stored, 1 a service failed to start,
2 bad usage or config, 130 interrupted (resume with the same command).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ._common import add_experiment_config

log = logging.getLogger(__name__)

HELP = "run a campaign (benchmark arms and/or chains) on Ray; rerun to resume"
DESCRIPTION = ("Plan CONFIG, sync it with the run's store (runs/<name>/store.sqlite), start model servers and "
               "evaluators, run every trial not yet stored, print a summary. Kill it or Ctrl-C it at any time: the "
               "same command resumes without repeating or losing a trial.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_experiment_config(parser)
    parser.add_argument("--run-dir", type=Path, default=None, help="where the store lives (default: the "
                                                                   "config's run_dir, runs/<name>)")
    parser.add_argument("--rerun-stale", action="store_true",
                        help="re-run stored trials whose problem, templates or attempt config changed, and the "
                             "finished trials downstream of them (skill arms, later chain hops: they read the "
                             "stale trial's SKILL.md)")
    parser.add_argument("--no-progress", action="store_true", help="log lines instead of a live display")
    parser.add_argument("--ray-address", default=None,
                        help="an existing Ray cluster (e.g. auto); default: a local Ray on 127.0.0.1. On a cluster, "
                             "attempts outlive this driver: rerun the same command after a crash and it collects "
                             "what finished meanwhile")
    parser.add_argument("--shared-dir", type=Path, default=None,
                        help="cluster runs with several nodes: a directory every node mounts at the same path "
                             "(NFS is fine here); attempts write their artifacts and outcomes under "
                             "<shared-dir>/<run dir name>, and the store stays in --run-dir on the head's disk")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..campaign.config import ExperimentConfigError, config_hash, load_experiment
    from ..campaign.plan import plan_campaign
    from ..judge.device import detect_gpu
    from ..store.sqlite_store import RunStore, StoreError
    from ._console import make_console

    console = make_console()
    try:
        config = load_experiment(args.config)
    except (ExperimentConfigError, FileNotFoundError) as err:
        print(f"mkb run: {err}", file=sys.stderr)
        return 2
    from ..models.roster import load_roster
    from ..problems import load_problems

    address = args.ray_address or os.environ.get("RAY_ADDRESS")
    if address:
        _init_ray(address)  # now, before planning: the cluster decides the target, not this (head) host
        has_gpu = _cluster_judges_on_gpu(config)
    else:
        has_gpu = detect_gpu()
    roster = load_roster(config.roster_dir)
    problems = None if config.problems.synthetic is not None else load_problems(config.problems.root)
    plan = plan_campaign(config, problems, roster, has_gpu)
    run_dir = Path(args.run_dir or config.run_dir)
    try:
        store = RunStore(run_dir)
    except StoreError as err:
        print(f"mkb run: {err}", file=sys.stderr)
        return 2
    with store:
        store.set_meta(config.model_dump_json(), config_hash(config), config.is_synthetic)
        sync = store.record_plan(plan.trials)
        already_stored = len(sync.done_ids)
        if sync.stale_ids:
            if args.rerun_stale:
                reset = store.rerun_stale(sync.stale_ids)
                # Reset dependants were current (in done_ids) and are not any more.
                already_stored = len(set(sync.done_ids).difference(reset.dependant_ids))
                console.print(f"re-running {len(reset.stale_ids)} stale trial(s) and {len(reset.dependant_ids)} "
                              "finished dependant(s) of them (they read a stale trial's SKILL.md)")
            else:
                hanging = store.finished_dependants(sync.stale_ids)
                console.print(f"[yellow]{len(sync.stale_ids)} stored trial(s) are stale (their problem, templates "
                              f"or attempt config changed) and {len(hanging)} finished trial(s) depend on them (they "
                              "read a stale trial's SKILL.md), kept as they are; --rerun-stale re-runs both"
                              "[/yellow]: " + ", ".join(sync.stale_ids[:5])
                              + (" ..." if len(sync.stale_ids) > 5 else ""))
        pending = len(plan) - already_stored - (0 if args.rerun_stale else len(sync.stale_ids))
        synthetic = " [bold yellow]SYNTHETIC[/bold yellow]" if config.is_synthetic else ""
        console.print(f"campaign {config.name}{synthetic}: {len(plan)} trials, {already_stored} already "
                      f"stored, {pending} to run → {run_dir}")
        code = 0
        if pending > 0:
            code = _execute(config, plan, store, roster, has_gpu, args, console)
        from ..campaign.summary import summarise

        print_summary(summarise(store), run_dir, has_gpu, console)
    return code


def _execute(config: Any, plan: Any, store: Any, roster: dict[str, Any], has_gpu: bool, args: argparse.Namespace,
             console: Any) -> int:
    import ray

    from ..campaign.config import model_concurrency, resolve_agent
    from ..campaign.runner import TrialContext
    from ..campaign.scheduler import Scheduler, SchedulerSettings
    from ..campaign.services import ModelServices, start_evaluators
    from ..campaign.spool import SpoolError

    started_ray = _init_ray(args.ray_address or os.environ.get("RAY_ADDRESS"))
    on_cluster = bool(args.ray_address or os.environ.get("RAY_ADDRESS"))
    services: Optional[ModelServices] = None
    try:
        placement = _placement(config, on_cluster)
        try:
            durable = _durable_parts(store.run_dir, args.shared_dir) if on_cluster else None
        except SpoolError as err:
            console.print(f"[red]mkb run:[/red] {err}")
            return 2
        synthetic = config.synthetic
        real_judge = synthetic is None or synthetic.judge == "real"
        root = str(config.problems.root) if config.problems.root else None
        evaluator = None
        if real_judge:
            device = config.scheduler.evaluator_devices
            device = ("cuda" if has_gpu else "cpu") if device == "auto" else device
            evaluator = start_evaluators(device, config.scheduler.evaluator_slots, root,
                                         str((store.run_dir / "baselines").resolve()), placement,
                                         keep_as=durable.name if durable else None, protocol=config.protocol)
        specs = {name: roster[name] for name in config.models}
        if synthetic is None:
            services = ModelServices(gpu_role=dict(placement.model_gpu))
            done = store.done_ids()
            waiting = {t.model for t in plan if t.trial_id not in done}
            console.print(f"starting model server(s) for {', '.join(sorted(waiting)) or 'none'} "
                          "(SmolLM2 on CPU: about a minute)")
            try:
                services.start([specs[m] for m in sorted(waiting)])
            except Exception as err:  # noqa: BLE001 - no server, no run: say why
                console.print(f"[red]a model server did not start:[/red] {err}")
                return 1
        budget_json = config.budget.model_dump_json()
        contexts = {name: TrialContext(budget_json=budget_json, agent=resolve_agent(config, spec),
                                       problems_root=root,
                                       synthetic_json=synthetic.model_dump_json() if synthetic else None,
                                       real_judge=bool(synthetic is not None and real_judge),
                                       shared_run_dir=durable.run_dir if durable else None)
                    for name, spec in specs.items()}
        concurrency = {name: model_concurrency(config, spec) for name, spec in specs.items()}
        settings = SchedulerSettings(max_trial_retries=config.scheduler.max_trial_retries,
                                     judged_inflight=_judged_inflight(config, evaluator))
        scheduler = Scheduler(plan, store, contexts, concurrency, specs, services, evaluator, settings,
                              launcher=durable.launcher if durable else None,
                              spool=durable.spool if durable else None, placement=placement)
        if durable is not None and durable.resumed:
            console.print("this run's launcher is still up: trials a previous driver started are collected, "
                          "not started again")
        with _progress_display(console, args.no_progress) as on_progress:
            scheduler.on_progress = on_progress
            result = scheduler.run()
        if durable is not None and evaluator is not None:
            evaluator.stop()   # finished or stopped on purpose; a driver that crashed leaves them to the next one
        if result.interrupted:
            console.print("[yellow]interrupted[/yellow]: finished trials are stored; run the same command again "
                          "to resume")
            return 130
        return 0
    finally:
        if services is not None:
            services.stop_all()
        if started_ray:
            ray.shutdown()


@dataclass(frozen=True)
class _DurableParts:
    """What lets a cluster run's attempts outlive this driver (mkb_ray/campaign/spool.py says how)."""

    run_dir: str          # where tasks write (absolute, the same on every node): the run dir or its shared twin
    name: str             # the run's name for its detached actors (launcher, evaluators, router)
    launcher: Any         # the run's TrialLauncher actor
    resumed: bool         # the launcher was left by an earlier driver of this run
    spool: Any            # OutcomeSpool


def _durable_parts(run_dir: Path, shared_root: Optional[Path]) -> _DurableParts:
    from ..actors.trial_launcher import get_or_start_launcher, launcher_name
    from ..campaign.runner import execute_batch
    from ..campaign.spool import OutcomeSpool, share_run_dir

    absolute = str(run_dir.resolve())
    shared = share_run_dir(run_dir, shared_root)
    launcher, resumed = get_or_start_launcher(absolute, execute_batch)
    return _DurableParts(str(shared), launcher_name(absolute), launcher, resumed, OutcomeSpool(shared))


def _judged_inflight(config: Any, evaluator: Any) -> Optional[int]:
    """How many trials may be in flight at once for the evaluators' capacity (None: no real judge). A real
    attempt spends most of its 40 minutes with the model and a few minutes judged; a synthetic one with a real
    judge does nothing else."""
    if evaluator is None:
        return None
    per_slot = 2 if config.is_synthetic else config.scheduler.attempts_per_eval_slot
    return evaluator.capacity * per_slot


def _placement(config: Any, on_cluster: bool) -> Any:
    """The configured placement; `auto` is `roles` on a cluster that offers the agent group's resource."""
    import ray

    from ..campaign.placement import AGENT_RESOURCE, Placement

    mode = config.scheduler.placement
    if mode == "auto":
        mode = "roles" if on_cluster and AGENT_RESOURCE in ray.cluster_resources() else "local"
    return Placement.of(mode)


def _cluster_judges_on_gpu(config: Any) -> bool:
    import ray

    devices = config.scheduler.evaluator_devices
    if devices != "auto":
        return devices == "cuda"
    return _placement(config, on_cluster=True).gpu_target(ray.cluster_resources())


def _init_ray(address: Optional[str]) -> bool:
    """Connect to the cluster at `address`, or start a local Ray; returns whether this process should shut it
    down at the end (it connected or started it). Idempotent: a second call keeps the first connection."""
    import ray

    if ray.is_initialized():
        return True
    if address:
        from . import PROCESS_ENV

        # A cluster's workers do not inherit this driver's environment: the variables they need travel with the job.
        ray.init(address=address, log_to_driver=False,
                 runtime_env={"env_vars": dict(PROCESS_ENV)})
        return True
    from ..models.local_ray import init_local_ray

    # Logical CPUs: a CPU model replica reserves the machine's cores, yet attempts mostly wait on the model, so
    # the evaluator and the synthetic trial tasks get their own slots.
    return init_local_ray(num_cpus=max(4, (os.cpu_count() or 2) + 2))


class _progress_display:
    """A live rich progress bar on a terminal; a log line every 10 s otherwise (CI, pipes)."""

    def __init__(self, console: Any, plain: bool) -> None:
        self.console, self.plain = console, plain or not console.is_terminal
        self._progress: Any = None
        self._task: Any = None
        self._last_line = 0.0
        self._last_done = -1

    def __enter__(self) -> Any:
        if not self.plain:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn("[bold]trials"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), TextColumn("{task.fields[line]}"), console=self.console)
            self._progress.start()
            self._task = self._progress.add_task("trials", total=None, line="")
        return self.update

    def update(self, p: Any) -> None:
        eta = p.eta_s()
        line = (f"running {p.running}, queued {p.queued}, failed {p.failed}, retries {p.retries}, "
                f"tokens {p.tokens:,}, ETA {_duration(eta)}")
        if self._progress is not None:
            self._progress.update(self._task, total=p.total, completed=p.done_before + p.done, line=line)
        elif (p.done != self._last_done and time.monotonic() - self._last_line >= 5.0) \
                or time.monotonic() - self._last_line >= 60.0 or (p.running == 0 and p.queued == 0):
            # A line when trials finish (at most every 5 s), else a heartbeat a minute.
            self._last_line, self._last_done = time.monotonic(), p.done
            self.console.print(f"trials {p.done_before + p.done}/{p.total}: {line}")

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


def _duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def print_summary(summary: Any, run_dir: Any, has_gpu: bool, console: Any) -> None:
    """The table printed after `mkb run`: final tiers per model and arm, skills written, what is synthetic."""
    from rich.table import Table

    from ..campaign.summary import TIER_COLUMNS, target_notes

    label = ""
    if summary.synthetic:
        label = (" [bold yellow](SYNTHETIC agent: its kernels are the shipped solutions; tiers measured by the real "
                 "judge)[/bold yellow]" if summary.real_judge else
                 " [bold yellow](SYNTHETIC: drawn, not measured)[/bold yellow]")
    table = Table(title=f"final tiers per arm — {run_dir}{label}")
    for column in ("model", "arm", *TIER_COLUMNS):
        table.add_column(column, justify="left" if column in ("model", "arm") else "right")
    for (model, group), tiers in sorted(summary.tiers.items()):
        table.add_row(model, group, *(str(tiers.get(t, 0)) for t in TIER_COLUMNS))
    console.print(table)
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(summary.statuses.items()))
    console.print(f"{summary.trials} trials: {statuses}; a non-empty SKILL.md written by {summary.skills_written}"
                  + (f"; {summary.synthetic} synthetic" if summary.synthetic else ""))
    for note in target_notes(summary, has_gpu):
        console.print(f"  {note}")
