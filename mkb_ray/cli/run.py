"""`mkb run CONFIG`: plan a campaign, sync the plan with the run's store, run what is missing, summarise.

Resumable by construction: trial ids are deterministic and the store knows which are written, so running the
same command again after a crash, a kill or Ctrl-C runs only the trials that were not written. Trials whose
problem, templates or attempt config changed since they were stored are reported stale and kept as they are,
unless `--rerun-stale`. Exit codes: 0 all trials stored, 1 a service failed to start, 2 bad usage or config,
130 interrupted (resume with the same command).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
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
                        help="re-run stored trials whose problem, templates or attempt config changed")
    parser.add_argument("--no-progress", action="store_true", help="log lines instead of a live display")
    parser.add_argument("--ray-address", default=None,
                        help="an existing Ray cluster (e.g. auto); default: a local Ray on 127.0.0.1")
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
        if sync.stale_ids:
            if args.rerun_stale:
                store.rerun_stale(sync.stale_ids)
                console.print(f"re-running {len(sync.stale_ids)} stale trial(s)")
            else:
                console.print(f"[yellow]{len(sync.stale_ids)} stored trial(s) are stale (their problem, templates "
                              f"or attempt config changed), kept as they are; --rerun-stale re-runs them[/yellow]: "
                              + ", ".join(sync.stale_ids[:5]) + (" ..." if len(sync.stale_ids) > 5 else ""))
        pending = len(plan) - len(sync.done_ids) - (0 if args.rerun_stale else len(sync.stale_ids))
        synthetic = " [bold yellow]SYNTHETIC[/bold yellow]" if config.is_synthetic else ""
        console.print(f"campaign {config.name}{synthetic}: {len(plan)} trials, {len(sync.done_ids)} already "
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

    started_ray = _init_ray(args.ray_address)
    services: Optional[ModelServices] = None
    try:
        synthetic = config.synthetic
        real_judge = synthetic is None or synthetic.judge == "real"
        root = str(config.problems.root) if config.problems.root else None
        evaluator = None
        if real_judge:
            device = config.scheduler.evaluator_devices
            device = ("cuda" if has_gpu else "cpu") if device == "auto" else device
            evaluator = start_evaluators(device, config.scheduler.evaluator_slots, root,
                                         str((store.run_dir / "baselines").resolve()))
        specs = {name: roster[name] for name in config.models}
        if synthetic is None:
            services = ModelServices()
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
                                       real_judge=bool(synthetic is not None and real_judge))
                    for name, spec in specs.items()}
        concurrency = {name: model_concurrency(config, spec) for name, spec in specs.items()}
        settings = SchedulerSettings(max_trial_retries=config.scheduler.max_trial_retries)
        scheduler = Scheduler(plan, store, contexts, concurrency, specs, services, evaluator, settings)
        with _progress_display(console, args.no_progress) as on_progress:
            scheduler.on_progress = on_progress
            result = scheduler.run()
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


def _init_ray(address: Optional[str]) -> bool:
    if address or os.environ.get("RAY_ADDRESS"):
        import ray

        from . import PROCESS_ENV

        # A cluster's workers do not inherit this driver's environment: the variables they need travel with the job.
        ray.init(address=address or os.environ["RAY_ADDRESS"], log_to_driver=False,
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
