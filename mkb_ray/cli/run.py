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
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from ._common import add_experiment_config

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress as ProgressBar, TaskID

    from ..campaign.build import CampaignRun, RunOptions
    from ..campaign.scheduler import Progress
    from ..campaign.summary import RunSummary
    from ..store import RunStore

log = logging.getLogger(__name__)

HELP = "run a campaign (benchmark arms and/or chains) on Ray; rerun to resume"
DESCRIPTION = ("Plan CONFIG, sync it with the run's store (runs/<name>/store.sqlite), start model servers and "
               "evaluators, run every trial not yet stored, print a summary. Kill it or Ctrl-C it at any time: the "
               "same command resumes without repeating or losing a trial. Exit 0 once every trial is stored, 1 when "
               "a model server does not start, 2 for bad usage or a config that does not load, 130 interrupted.")


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
    from ..campaign.build import RunOptions, judges_on_gpu, plan_run, record_run
    from ..campaign.config import ExperimentConfigError, load_experiment
    from ..store.sqlite_store import RunStore, StoreError
    from . import PROCESS_ENV
    from ._console import make_console

    console = make_console()
    try:
        config = load_experiment(args.config)
    except (ExperimentConfigError, FileNotFoundError) as err:
        print(f"mkb run: {err}", file=sys.stderr)
        return 2
    options = RunOptions(ray_address=args.ray_address or os.environ.get("RAY_ADDRESS") or None,
                         shared_dir=args.shared_dir, ray_env=PROCESS_ENV)
    campaign = plan_run(config, judges_on_gpu(config, options))
    run_dir = Path(args.run_dir or config.run_dir)
    try:
        store = RunStore(run_dir)
    except StoreError as err:
        print(f"mkb run: {err}", file=sys.stderr)
        return 2
    with store:
        synced = record_run(campaign, store, args.rerun_stale)
        stale = synced.sync.stale_ids
        if synced.reset is not None:
            console.print(f"re-running {len(synced.reset.stale_ids)} stale trial(s) and "
                          f"{len(synced.reset.dependant_ids)} finished dependant(s) of them (they read a stale "
                          "trial's SKILL.md)")
        elif stale:
            console.print(f"[yellow]{len(stale)} stored trial(s) are stale (their problem, templates or attempt "
                          f"config changed) and {len(synced.hanging)} finished trial(s) depend on them (they read a "
                          "stale trial's SKILL.md), kept as they are; --rerun-stale re-runs both[/yellow]: "
                          + ", ".join(stale[:5]) + (" ..." if len(stale) > 5 else ""))
        label = " [bold yellow]SYNTHETIC[/bold yellow]" if config.is_synthetic else ""
        console.print(f"campaign {config.name}{label}: {len(campaign.plan)} trials, {synced.already_stored} "
                      f"already stored, {synced.pending} to run → {run_dir}")
        code = 0
        if synced.pending > 0:
            code = _execute(campaign, store, options, args.no_progress, console)
        from ..campaign.summary import summarise

        print_summary(summarise(store), run_dir, campaign.has_gpu, console)
    return code


def _execute(campaign: CampaignRun, store: RunStore, options: RunOptions, no_progress: bool,
             console: Console) -> int:
    """Start the campaign's services and run its scheduler; the exit code."""
    from ..campaign.build import ModelServerStartError, start_campaign
    from ..campaign.spool import SpoolError

    try:
        running = start_campaign(campaign, store, options, say=console.print)
    except SpoolError as err:
        console.print(f"[red]mkb run:[/red] {err}")
        return 2
    except ModelServerStartError as err:
        console.print(f"[red]a model server did not start:[/red] {err}")
        return 1
    with running:
        if running.resumed:
            console.print("this run's launcher is still up: trials a previous driver started are collected, "
                          "not started again")
        with _progress_display(console, no_progress) as on_progress:
            result = running.run(on_progress)
        if result.interrupted:
            console.print("[yellow]interrupted[/yellow]: finished trials are stored; run the same command again "
                          "to resume")
            return 130
        return 0


class _progress_display:
    """A live rich progress bar on a terminal; a log line every 10 s otherwise (CI, pipes)."""

    def __init__(self, console: Console, plain: bool) -> None:
        self.console, self.plain = console, plain or not console.is_terminal
        self._progress: Optional[ProgressBar] = None
        self._task: Optional[TaskID] = None
        self._last_line = 0.0
        self._last_done = -1

    def __enter__(self) -> Callable[[Progress], None]:
        if not self.plain:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn("[bold]trials"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), TextColumn("{task.fields[line]}"), console=self.console)
            self._progress.start()
            self._task = self._progress.add_task("trials", total=None, line="")
        return self.update

    def update(self, p: Progress) -> None:
        eta = p.eta_s()
        line = (f"running {p.running}, queued {p.queued}, failed {p.failed}, retries {p.retries}, "
                f"tokens {p.tokens:,}, ETA {_duration(eta)}")
        if self._progress is not None and self._task is not None:
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


def print_summary(summary: RunSummary, run_dir: Path, has_gpu: bool, console: Console) -> None:
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
