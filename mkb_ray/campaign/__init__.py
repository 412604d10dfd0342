"""Campaigns: an experiment YAML → a plan of trials → trials run on Ray → outcomes in the run store.

    config.py     ExperimentConfig, load_experiment (every field checked; errors name file and field)
    plan.py       plan_campaign: deterministic trial ids and dependencies; find_stale; estimate
    reconcile.py  a plan against the run store: record_plan (new/done/stale), rerun_stale with its dependants
    build.py      from a config to a runnable campaign: plan_run, model_lanes, build_scheduler, start_campaign
    scheduler.py  Scheduler: where a hop is scheduled (dispatch, retries, batching writes, Ctrl-C)
    trial_task.py execute_trial: the body of a trial's Ray task (a real attempt or a synthetic draw)
    services.py   evaluator actors and model servers of a campaign (start, health, restart)
    placement.py  which Ray resources trials, evaluators and model replicas ask for (local | roles)
    submit.py     who submits and owns a batch's task (the driver, or a cluster run's launcher); autoscaler demand
    spool.py      outcomes a cluster run's tasks leave before reporting back; their ingestion by the next driver
    model_health.py  model-server probes and restarts, off the scheduler loop
    summary.py    what `mkb run` summarises from the store
Trials and outcomes are records (`mkb_ray.records`); the commands are `mkb plan` and `mkb run` (`mkb_ray.cli`).
"""
from __future__ import annotations

from ..records import Trial, TrialOutcome
from .config import ExperimentConfig, ExperimentConfigError, config_hash, load_experiment
from .plan import Plan, estimate, find_stale, plan_campaign

__all__ = ["ExperimentConfig", "ExperimentConfigError", "Plan", "Trial", "TrialOutcome", "config_hash", "estimate",
           "find_stale", "load_experiment", "plan_campaign"]
