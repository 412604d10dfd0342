"""Campaigns: an experiment YAML → a plan of trials → trials run on Ray → outcomes in the run store.

    config.py     ExperimentConfig, load_experiment (every field checked; errors name file and field)
    plan.py       plan_campaign: deterministic trial ids and dependencies; find_stale; estimate
    trial.py      Trial (one planned attempt), TrialOutcome (what the store keeps)
    scheduler.py  Scheduler: where a hop is scheduled (dispatch, retries, batching writes, Ctrl-C)
    runner.py     execute_trial: the body of a trial's Ray task (a real attempt or a synthetic draw)
    services.py   evaluator actors and model servers of a campaign (start, health, restart)
    run_cli.py    `mkb run`; plan_cli.py `mkb plan`; summary.py the printed summary
"""
from __future__ import annotations

from .config import ExperimentConfig, ExperimentConfigError, config_hash, load_experiment
from .plan import Plan, estimate, find_stale, plan_campaign
from .trial import Trial, TrialOutcome

__all__ = ["ExperimentConfig", "ExperimentConfigError", "Plan", "Trial", "TrialOutcome", "config_hash", "estimate",
           "find_stale", "load_experiment", "plan_campaign"]
