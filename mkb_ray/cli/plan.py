"""`mkb plan CONFIG`: what a campaign would run, without running anything.

Prints trial counts by kind, arm and model, the longest dependency path, the target each DSL resolves to on this
machine, a labelled cost estimate with its assumptions, and the first trials with their dependencies. Exit codes: 0,
or 2 with one line on stderr for a config that does not load (bad YAML, unknown field, model or problem).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ._common import add_experiment_config

HELP = "expand an experiment YAML into trials: counts, dependencies, a GPU-hour estimate"
DESCRIPTION = ("Print what `mkb run CONFIG` would run: trials per model, kind and arm, the longest dependency "
               "chain, where each DSL's kernels are judged on this machine, and an estimate with its assumptions. "
               "Exit 2 for a config that does not load (the message names file and field).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_experiment_config(parser)
    parser.add_argument("--json", action="store_true", help="print the plan summary as JSON")
    parser.add_argument("--show", type=int, default=10, metavar="N",
                        help="list the first N trial ids with their dependencies (default 10; 0: none)")
    gpu = parser.add_mutually_exclusive_group()
    gpu.add_argument("--gpu", dest="has_gpu", action="store_true", default=None,
                     help="plan as for a machine with a GPU (default: look at this machine)")
    gpu.add_argument("--no-gpu", dest="has_gpu", action="store_false", help="plan as for a machine without one")
    parser.set_defaults(handler=run)


def _error(message: str) -> int:
    print("mkb: error: " + " ".join(message.split()), file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from ..campaign.build import plan_run
    from ..campaign.config import ExperimentConfigError, config_hash, describe_target, load_experiment, \
        resolve_target
    from ..campaign.plan import estimate
    from ..judge.device import detect_gpu
    from ..models.roster import RosterError

    try:
        config = load_experiment(args.config)
        has_gpu = detect_gpu() if args.has_gpu is None else args.has_gpu
        campaign = plan_run(config, has_gpu, load_problem_files=False)
    except (ExperimentConfigError, RosterError) as err:
        return _error(str(err))
    plan = campaign.plan
    cost = estimate(plan, campaign.roster, config)
    shown = plan.trials[:max(0, args.show)]
    summary: dict[str, Any] = {
        "name": config.name, "description": config.description, "synthetic": config.is_synthetic,
        "config_hash": config_hash(config), "run_dir": str(config.run_dir), "trials": len(plan),
        "by_kind": plan.counts_by_kind(), "by_arm": plan.counts_by_arm(), "by_model": plan.counts_by_model(),
        "depth": plan.depth(), "has_gpu": has_gpu,
        "targets": {dsl: resolve_target(dsl, config, has_gpu) for dsl in ("cutedsl", "tirx")},
        "estimate": {"attempts": cost.attempts, "judged_submissions": cost.judged_submissions,
                     "model_gpu_hours": cost.model_gpu_hours, "evaluator_gpu_hours": cost.evaluator_gpu_hours,
                     "evaluator_cpu_hours": cost.evaluator_cpu_hours, "gpu_hours": cost.gpu_hours,
                     "critical_path_hours": cost.critical_path_hours, "assumptions": cost.assumptions},
        "first_trials": [{"id": t.trial_id, "depends_on": list(t.depends_on)} for t in shown],
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0

    from rich.table import Table

    from ._console import make_console

    console = make_console()
    label = " [bold magenta]SYNTHETIC[/bold magenta]" if config.is_synthetic else ""
    console.print(f"[bold]{config.name}[/bold]{label}: {config.description}")
    console.print(f"config {summary['config_hash'][:12]}  run dir {config.run_dir}  "
                  f"{len(plan):,} trials, longest dependency path {summary['depth']} trials")

    kinds = sorted(summary["by_kind"])
    by_model = Table(title="trials by model and kind")
    by_model.add_column("model")
    for kind in kinds:
        by_model.add_column(kind, justify="right")
    by_model.add_column("total", justify="right")
    for model, counts in summary["by_model"].items():
        by_model.add_row(model, *(f"{counts.get(k, 0):,}" for k in kinds), f"{sum(counts.values()):,}")
    by_model.add_row("[bold]all[/bold]", *(f"{summary['by_kind'][k]:,}" for k in kinds), f"{len(plan):,}")
    console.print(by_model)

    by_arm = Table(title="trials by arm")
    by_arm.add_column("arm")
    by_arm.add_column("trials", justify="right")
    for arm, n in summary["by_arm"].items():
        by_arm.add_row(arm, f"{n:,}")
    console.print(by_arm)

    machine = "this machine has a GPU" if has_gpu else "this machine has no GPU"
    console.print(f"targets ({machine}; config target: {config.target}):")
    for dsl in ("cutedsl", "tirx"):
        console.print(f"  {dsl}: {describe_target(dsl, config, has_gpu)}")

    est = Table(title="ESTIMATE (not a measurement)")
    est.add_column("model")
    est.add_column("serving")
    est.add_column("attempts", justify="right")
    est.add_column("attempt-h", justify="right")
    est.add_column("GPUs/replica", justify="right")
    est.add_column("attempts/replica", justify="right")
    est.add_column("GPU-h", justify="right")
    for m in cost.per_model:
        est.add_row(m.model, m.serving, f"{m.attempts:,}", f"{m.attempt_hours:,.1f}", str(m.gpus_per_replica),
                    f"{m.attempts_per_replica:g}", f"{m.gpu_hours:,.1f}")
    console.print(est)
    console.print(f"model GPU-h {cost.model_gpu_hours:,.1f} + evaluator GPU-h {cost.evaluator_gpu_hours:,.1f} "
                  f"= [bold]{cost.gpu_hours:,.1f} GPU-h[/bold]; evaluator CPU-slot-h {cost.evaluator_cpu_hours:,.1f}; "
                  f"{cost.judged_submissions:,.0f} judged submissions; critical path {cost.critical_path_hours:,.1f} h")
    console.print("assumptions:")
    for line in cost.assumptions:
        console.print(f"  - {line}")

    if shown:
        first = Table(title=f"first {len(shown)} of {len(plan):,} trials")
        first.add_column("trial", no_wrap=True)
        first.add_column("dsl")
        first.add_column("target")
        first.add_column("depends on", no_wrap=True)
        for t in shown:
            first.add_row(t.trial_id, t.dsl, t.target, ", ".join(t.depends_on) or "-")
        console.print(first)
    return 0

