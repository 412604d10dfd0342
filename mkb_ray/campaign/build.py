"""From a validated experiment config to a runnable campaign, in one place — the Ray Serve LLM pattern (a config,
a pure builder, then the deployment) — so that `mkb run`, the scale benchmark and the tests wire a campaign the same
way.

    plan_run(config, has_gpu)            the roster and the plan (pure)
    record_run(run, store, rerun_stale)  the config and the plan into the run's store (reconcile.py)
    model_lanes / scheduler_settings     each model's lane, the scheduler's bounds (pure)
    start_campaign(run, store, options)  Ray, placement, a cluster run's durable parts, evaluators, model servers,
                                         and the Scheduler over them: a `RunningCampaign`, which stops what it
                                         started when closed
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Optional

from ..models.serve_config import GpuShare
from ..store import RunStore
from .config import ExperimentConfig, config_hash, model_concurrency, resolve_agent
from .placement import AGENT_RESOURCE, Placement
from .plan import Plan, plan_campaign
from .protocols import ModelServers
from .reconcile import Reconciliation, reconcile
from .trial_task import TrialContext, execute_batch
from .scheduler import ModelLane, Progress, RunResult, Scheduler, SchedulerSettings
from .services import EvaluatorPool, ModelServices, evaluator_gpu_share, start_evaluators
from .spool import DurableParts, OutcomeSpool, share_run_dir

if TYPE_CHECKING:
    from ..models.roster import ModelSpec

log = logging.getLogger(__name__)


class ModelServerStartError(RuntimeError):
    """A model server of the campaign did not start (no server, no run); the message is its error."""


@dataclass(frozen=True)
class RunOptions:
    """How a campaign is run here, beside its config (the command line's choices)."""

    ray_address: Optional[str] = None   # an existing Ray cluster; None: a local Ray on 127.0.0.1
    shared_dir: Optional[Path] = None   # a cluster run's directory that every node mounts (spool.share_run_dir)
    ray_env: Mapping[str, str] = field(default_factory=dict)   # variables a cluster's workers need (not inherited)

    @property
    def on_cluster(self) -> bool:
        return bool(self.ray_address)


@dataclass(frozen=True)
class CampaignRun:
    """A config planned for a machine: what `start_campaign` runs."""

    config: ExperimentConfig
    roster: Mapping[str, "ModelSpec"]
    plan: Plan
    has_gpu: bool   # the evaluators judge on GPUs (the cluster's, on a cluster run)


def plan_run(config: ExperimentConfig, has_gpu: bool, load_problem_files: bool = True) -> CampaignRun:
    """The roster and the plan. `load_problem_files`: read the problems root of a measured campaign (its problem
    hashes); `mkb plan` does without."""
    from ..models.roster import load_roster
    from ..problems import load_problems

    roster = load_roster(config.roster_dir)
    if config.scheduler.model_devices == "cuda":
        roster = {name: spec.on_gpu() if spec.is_local else spec for name, spec in roster.items()}
    problems = None if config.problems.synthetic is not None or not load_problem_files else \
        load_problems(config.problems.root)
    return CampaignRun(config, roster, plan_campaign(config, problems, roster, has_gpu), has_gpu)


def record_run(run: CampaignRun, store: RunStore, rerun_stale: bool) -> Reconciliation:
    """Record the resolved config in the run's store and reconcile the plan with it (reconcile.py)."""
    store.set_meta(run.config.model_dump_json(), config_hash(run.config), run.config.is_synthetic)
    return reconcile(store, run.plan.trials, rerun_stale)


def model_lanes(config: ExperimentConfig, roster: Mapping[str, "ModelSpec"],
                shared_run_dir: Optional[str] = None) -> dict[str, ModelLane]:
    """Each model's lane: its trials' context (budget, agent, problems, synthetic spec, real judging, a cluster
    run's shared directory), its concurrency and its roster spec."""
    synthetic = config.synthetic
    real_judge = synthetic is None or synthetic.judge == "real"
    budget_json = config.budget.model_dump_json()
    lanes = {}
    for name in config.models:
        spec = roster[name]
        context = TrialContext(budget_json=budget_json, agent=resolve_agent(config, spec),
                               problems_root=_problems_root(config),
                               synthetic_json=synthetic.model_dump_json() if synthetic else None,
                               real_judge=bool(synthetic is not None and real_judge), shared_run_dir=shared_run_dir)
        lanes[name] = ModelLane(context, model_concurrency(config, spec), spec)
    return lanes


def scheduler_settings(config: ExperimentConfig, evaluator: Optional[EvaluatorPool]) -> SchedulerSettings:
    """The config's retries, and how many trials may be in flight at once for the evaluators' capacity (None: no
    real judge). A real attempt spends most of its 40 minutes with the model and a few minutes judged; a synthetic
    one with a real judge does nothing else."""
    judged_inflight = None
    if evaluator is not None:
        per_slot = 2 if config.is_synthetic else config.scheduler.attempts_per_eval_slot
        judged_inflight = evaluator.capacity * per_slot
    return SchedulerSettings(max_trial_retries=config.scheduler.max_trial_retries, judged_inflight=judged_inflight)


def build_scheduler(run: CampaignRun, store: RunStore, evaluator: Optional[EvaluatorPool] = None,
                    services: Optional[ModelServers] = None, durable: Optional[DurableParts] = None,
                    placement: Placement = Placement()) -> Scheduler:
    """The scheduler of a campaign over its started parts (pure wiring)."""
    lanes = model_lanes(run.config, run.roster, durable.run_dir if durable else None)
    from .handoff import HandOffBuilder

    return Scheduler(run.plan, store, lanes, services, evaluator, scheduler_settings(run.config, evaluator),
                     durable=durable, placement=placement,
                     hand_offs=HandOffBuilder.for_config(store, run.config))  # type: ignore[arg-type]


# -- the deployment: what starts Ray-side parts ---------------------------------------------------------------------
def connect_ray(options: RunOptions) -> bool:
    """Connect to the cluster at `options.ray_address`, or start a local Ray; returns whether this process should
    shut it down at the end (it connected or started it). Idempotent: a second call keeps the first connection."""
    import ray

    if ray.is_initialized():
        return True
    if options.ray_address:
        # A cluster's workers do not inherit this driver's environment: the variables they need travel with the job.
        ray.init(address=options.ray_address, log_to_driver=False, runtime_env={"env_vars": dict(options.ray_env)})
        return True
    from ..models.local_ray import init_local_ray

    # Logical CPUs: a CPU model replica reserves the machine's cores, yet attempts mostly wait on the model, so
    # the evaluator and the synthetic trial tasks get their own slots.
    return init_local_ray(num_cpus=max(4, (os.cpu_count() or 2) + 2))


def resolve_placement(config: ExperimentConfig, on_cluster: bool) -> Placement:
    """The configured placement; `auto` is `roles` on a cluster that offers the agent group's resource."""
    import ray

    mode = config.scheduler.placement
    if mode == "auto":
        mode = "roles" if on_cluster and AGENT_RESOURCE in ray.cluster_resources() else "local"
    return Placement.of(mode)


def judges_on_gpu(config: ExperimentConfig, options: RunOptions) -> bool:
    """Whether the campaign's evaluators judge on GPUs. On a cluster (connected now, before planning) the cluster
    decides, not this head host; locally, this machine."""
    if not options.on_cluster:
        from ..judge.device import detect_gpu

        return detect_gpu()
    import ray

    connect_ray(options)
    devices = config.scheduler.evaluator_devices
    if devices != "auto":
        return devices == "cuda"
    return resolve_placement(config, on_cluster=True).gpu_target(ray.cluster_resources())


def durable_parts(run_dir: Path, shared_root: Optional[Path]) -> DurableParts:
    """A cluster run's launcher (started, or found alive from an earlier driver) and spool; raises SpoolError when
    the shared directory cannot be used."""
    from ..actors.trial_launcher import get_or_start_launcher, launcher_name

    absolute = str(run_dir.resolve())
    shared = share_run_dir(run_dir, shared_root)
    launcher, resumed = get_or_start_launcher(absolute, execute_batch)
    return DurableParts(str(shared), launcher_name(absolute), launcher, resumed, OutcomeSpool(shared))


@dataclass
class RunningCampaign:
    """A campaign's scheduler with the services it runs over. Use as a context manager: leaving it stops the
    model servers and the Ray this process started."""

    scheduler: Scheduler
    evaluator: Optional[EvaluatorPool]
    services: Optional[ModelServices]
    durable: Optional[DurableParts]
    started_ray: bool

    @property
    def resumed(self) -> bool:
        """A cluster run whose launcher an earlier driver left: its trials are collected, not started again."""
        return self.durable is not None and self.durable.resumed

    def run(self, on_progress: Optional[Callable[[Progress], None]] = None) -> RunResult:
        self.scheduler.on_progress = on_progress
        result = self.scheduler.run()
        if self.durable is not None and self.evaluator is not None:
            self.evaluator.stop()   # finished or stopped on purpose; a driver that crashed leaves them to the next one
        return result

    def __enter__(self) -> "RunningCampaign":
        return self

    def __exit__(self, *exc: object) -> None:
        _release(self.services, self.started_ray)


def _release(services: Optional[ModelServices], started_ray: bool) -> None:
    if services is not None:
        services.stop_all()
    if started_ray:
        import ray

        ray.shutdown()


def start_campaign(run: CampaignRun, store: RunStore, options: RunOptions,
                   say: Callable[[str], None] = log.info) -> RunningCampaign:
    """Start what the campaign's trials talk to — Ray, a cluster run's launcher and spool, the evaluators (real
    judging), the model servers of the models with trials left (measured campaigns) — and wire the scheduler over
    them. Raises SpoolError (an unusable shared directory) or ModelServerStartError, having stopped what it
    started. `say` hears what takes a while."""
    config = run.config
    started_ray = connect_ray(options)
    services: Optional[ModelServices] = None
    try:
        placement = resolve_placement(config, options.on_cluster)
        durable = durable_parts(store.run_dir, options.shared_dir) if options.on_cluster else None
        evaluator = None
        if config.synthetic is None or config.synthetic.judge == "real":
            device = config.scheduler.evaluator_devices
            device = ("cuda" if run.has_gpu else "cpu") if device == "auto" else device
            evaluator = start_evaluators(device, config.scheduler.evaluator_slots, _problems_root(config),
                                         str((store.run_dir / "baselines").resolve()), placement,
                                         keep_as=durable.name if durable else None, protocol=config.protocol,
                                         gpu_share=evaluator_gpu_share(config.scheduler.model_gpu_fraction))
        if config.synthetic is None:
            services = ModelServices(gpu=GpuShare(config.scheduler.model_gpu_fraction, dict(placement.model_gpu)))
            done = store.done_ids()
            waiting = sorted({t.model for t in run.plan if t.trial_id not in done})
            where = ", ".join(f"{m} on {'GPU' if run.roster[m].num_gpus else 'CPU'}" for m in waiting) or "none"
            # Measured starts: SmolLM2 on 2 CPU cores ~1 min; on an H100 (vLLM 0.26 under Serve LLM) 2-3.5 min.
            say(f"starting model server(s): {where} (a few minutes)")
            try:
                services.start([run.roster[m] for m in waiting])
            except Exception as err:  # noqa: BLE001 - no server, no run: say why
                raise ModelServerStartError(str(err)) from err
        scheduler = build_scheduler(run, store, evaluator, services, durable, placement)
    except BaseException:
        _release(services, started_ray)
        raise
    return RunningCampaign(scheduler, evaluator, services, durable, started_ray)


def _problems_root(config: ExperimentConfig) -> Optional[str]:
    return str(config.problems.root) if config.problems.root else None
