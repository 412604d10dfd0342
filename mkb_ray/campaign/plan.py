"""The planner: an ExperimentConfig expanded into trials with deterministic ids and dependencies.

Pure and Ray-free: the same config, problems, roster and machine give the same plan, in the same order, and every
trial comes after the trial it depends on. Ids follow `trial.py`:
    <model>/<problem>/r<k>/<arm>                 benchmark arms, k = 0..replicates-1
    <model>/<problem>/chain<c>/h<k>              chain hops, k = 0..hops-1
    <model>/<problem>/chain<c>/base_<dsl>_r<k>   chain baselines, k = 0..baselines-1
    <model>/<problem>/r<k>/<skill arm>~<token>   intervention arms (records/intervention.py), after every
                                                 benchmark trial of the model (a placebo reads another problem's solo)
Benchmark: per model × problem × replicate, the listed arms; cutedsl2tirx_skill reads the SKILL.md of
solo_cutedsl of the same replicate (and runs in TIRx), tirx2cutedsl_skill that of solo_tirx (and runs in CuTe
DSL); a skill arm's source solo arm is planned even when not listed, and so is every skill arm an intervention is a twin
of. Chain twins — gated chains (a verification gate with `chains: true`) and containment-probe chains — are chains
C.. of the cell (C = the plain chains), each the twin of one plain chain, sharing its baselines.

Each trial carries three hashes, so that a resumed campaign can tell which stored results no longer match:
`config_hash` covers only what shapes that attempt (model spec without its serving-capacity fields, budget,
resolved agent, target, synthetic spec) — adding a model or a problem leaves other trials current.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AbstractSet, Callable, Iterator, Mapping, Optional, Sequence

from ..checker.problem_hash import problem_hash  # the judge's own hash (stdlib-only: no torch here)
from .config import BENCHMARK_ARMS, ExperimentConfig, ExperimentConfigError, ProblemSelection, check_references, \
    model_concurrency, resolve_agent, resolve_target
from ..records import Trial, TrialGraph, chain_id_of
from ..records.intervention import SEPARATOR

if TYPE_CHECKING:
    from ..models.roster import ModelSpec
    from ..problems import ProblemSet
    from ..records import BudgetSpec
    from ..synthetic.spec import SyntheticSpec

# arm name → (dsl, arm, source arm)
_ARMS: dict[str, tuple[str, str, Optional[str]]] = {
    "solo_cutedsl": ("cutedsl", "solo", None),
    "solo_tirx": ("tirx", "solo", None),
    "cutedsl2tirx_skill": ("tirx", "skill", "solo_cutedsl"),
    "tirx2cutedsl_skill": ("cutedsl", "skill", "solo_tirx"),
}
# ModelSpec fields that size the serving, not the attempt: changing them must not make stored trials stale.
CAPACITY_FIELDS = frozenset({"min_replicas", "max_replicas", "target_ongoing_requests", "max_concurrency",
                             "prices", "notes", "gpu_kernel_warmup"})


class _Index(dict):
    """trial id → Trial; also callable, `plan.by_id(tid)`."""

    __slots__ = ()

    def __call__(self, trial_id: str) -> Trial:
        return self[trial_id]


@dataclass
class Plan:
    """The trials of a campaign, in dependency order, with indexes for the scheduler."""

    trials: list[Trial]
    synthetic: bool = False
    by_id: _Index = field(init=False, repr=False)
    graph: TrialGraph = field(init=False, repr=False, compare=False)  # positions index `trials`

    def __post_init__(self) -> None:
        self.graph = TrialGraph(self.trials)  # raises ValueError on a duplicate id or a trial before its source
        self.by_id = _Index((t.trial_id, t) for t in self.trials)

    def __len__(self) -> int:
        return len(self.trials)

    def __iter__(self) -> Iterator[Trial]:
        return iter(self.trials)

    def __contains__(self, trial_id: object) -> bool:
        return trial_id in self.graph

    def dependants(self, trial_id: str) -> list[Trial]:
        """Trials that wait on `trial_id` directly (skill arms of a solo arm, the next hop of a chain)."""
        return self.graph.dependants(trial_id)

    def counts_by_kind(self) -> dict[str, int]:
        return dict(Counter(t.kind for t in self.trials))

    def counts_by_arm(self) -> dict[str, int]:
        """Benchmark arm names; chain trials as chain_hop / chain_base."""
        return dict(Counter(t.arm_name or t.kind for t in self.trials))

    def counts_by_model(self) -> dict[str, dict[str, int]]:
        """model → kind → trials."""
        out: dict[str, Counter] = {}
        for t in self.trials:
            out.setdefault(t.model, Counter())[t.kind] += 1
        return {model: dict(counts) for model, counts in out.items()}

    def depth(self) -> int:
        """Trials on the longest dependency path (a solo arm 1, solo → skill 2, a 100-hop chain 100)."""
        return self.graph.depth()

    def ready(self, done: AbstractSet[str]) -> list[Trial]:
        """Trials not in `done` whose dependencies all are, in plan order. Costs O(roots + |done|), not a scan
        of every trial (a 100-hop campaign has ~900 roots among ~90k trials); ids in `done` that are not planned
        are ignored."""
        return self.graph.ready(done)

    def newly_ready(self, finished: str, done: AbstractSet[str]) -> list[Trial]:
        """The dependants of `finished` that `done` (which includes it) makes ready: the scheduler's O(1) step."""
        return self.graph.newly_ready(finished, done)

    def descendants(self, trial_ids: Sequence[str]) -> list[str]:
        """Every trial downstream of `trial_ids` (not themselves), in plan order."""
        return self.graph.descendants(trial_ids)


def trial_config_hash(spec: "ModelSpec", budget: "BudgetSpec", agent: str, target: str,
                      synthetic: "SyntheticSpec | None", protocol: str = "mkb-ray") -> str:
    """sha256 over what shapes one attempt: the model spec (capacity fields left out), budget, agent, target,
    synthetic spec and grading protocol (named only when not the default, so existing hashes stay valid)."""
    model = spec.model_dump(mode="json", exclude=set(CAPACITY_FIELDS))
    if not spec.num_gpus or spec.gpu_dtype is None:
        # It shapes GPU serving only; left out otherwise, so trials stored before the field existed stay fresh.
        model.pop("gpu_dtype", None)
    payload = {"model": model, "budget": budget.model_dump(mode="json"), "agent": agent, "target": target,
               "synthetic": synthetic.model_dump(mode="json") if synthetic is not None else None}
    if protocol != "mkb-ray":
        payload["protocol"] = protocol
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def synthetic_problem_hash(problem_id: str) -> str:
    return hashlib.sha256(problem_id.encode()).hexdigest()


def plan_campaign(config: ExperimentConfig, problems: "ProblemSet | None", roster: "dict[str, ModelSpec]",
                  has_gpu: bool) -> Plan:
    """Every trial of `config`. problems: the loaded problem set (None: load the config's root; synthetic
    campaigns need none). has_gpu: whether this machine has a GPU (resolves `target: auto`). Raises
    ExperimentConfigError for unknown models or problems."""
    from ..agents.skill import template_hash

    selection = check_references(config, roster, problems)
    template = template_hash()
    problem_hashes = {pid: (problem_hash(selection.paths[pid]) if pid in selection.paths
                            else synthetic_problem_hash(pid)) for pid in selection.campaign}
    if selection.cuda_pinned and not has_gpu:
        # Every judgement of these would fail on the machine, not the kernel: refuse before any attempt runs.
        where = "; ".join(f"{selection.paths[pid]} (line {', '.join(map(str, lines))})"
                          for pid, lines in selection.cuda_pinned.items())
        raise ExperimentConfigError(f"problems: make_inputs() puts tensors on CUDA in {where}, and there is no GPU "
                                    f"here, so they cannot be judged, not even compile-only; deselect them or run "
                                    f"on a GPU host")
    targets = {dsl: resolve_target(dsl, config, has_gpu) for dsl in ("cutedsl", "tirx")}
    trials: list[Trial] = []
    add = trials.append
    for model in config.models:
        spec = roster[model]
        agent = resolve_agent(config, spec)
        cfg = {dsl: trial_config_hash(spec, config.budget, agent, targets[dsl], config.synthetic, config.protocol)
               for dsl in ("cutedsl", "tirx")}
        listed = set(config.benchmark.arms) if config.benchmark is not None else set()
        listed.update(arm for spec in config.benchmark_interventions for arm in spec.arms)
        if listed:
            arms = [a for a in BENCHMARK_ARMS if a in listed or any(_ARMS[s][2] == a for s in listed)]
            for pid in selection.campaign:
                phash = problem_hashes[pid]
                for r in range(config.replicates):
                    prefix = f"{model}/{pid}/r{r}/"
                    for arm_name in arms:
                        dsl, arm, source = _ARMS[arm_name]
                        add(Trial(trial_id=prefix + arm_name, model=model, problem_id=pid, dsl=dsl,
                                  target=targets[dsl], arm=arm, kind="benchmark", replicate=r,
                                  skill_from=prefix + source if source else None, arm_name=arm_name,
                                  config_hash=cfg[dsl], problem_hash=phash, template_hash=template))
            _plan_interventions(config, model, selection, problem_hashes, targets, cfg, template, add)
        if config.chains is not None:
            _plan_chains(config, model, selection.chains, problem_hashes, targets, cfg, template, add)
    return Plan(trials, synthetic=config.is_synthetic)


def _with_intervention(config_hash: str, spec: object) -> str:
    """A trial's config hash with the intervention that shapes it (changing e.g. an ablation's annotator makes its
    stored trials stale, and only them)."""
    payload = json.dumps({"config": config_hash, "intervention": spec.model_dump(mode="json")},  # type: ignore[attr-defined]
                         sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def placebo_donor(problem_id: str, campaign: Sequence[str], family_of: Mapping[str, str]) -> Optional[str]:
    """The problem whose SKILL.md a placebo of `problem_id` reads: the next problem of the same family in campaign
    order, cyclically; None when the family has no other problem in the campaign."""
    family = family_of[problem_id]
    members = [pid for pid in campaign if family_of[pid] == family]
    if len(members) < 2:
        return None
    return members[(members.index(problem_id) + 1) % len(members)]


def _plan_interventions(config: ExperimentConfig, model: str, selection: ProblemSelection,
                        problem_hashes: dict[str, str], targets: dict[str, str], cfg: dict[str, str], template: str,
                        add: Callable[[Trial], None]) -> None:
    """The intervention twins of the model's skill arms (after all its benchmark trials: a placebo reads another
    problem's solo). Raises ExperimentConfigError for a placebo whose problem has no other of its family."""
    for i, spec in enumerate(config.interventions):
        if not spec.on_benchmark:
            continue
        for arm_name in spec.arms:
            dsl, _, source = _ARMS[arm_name]
            assert source is not None
            config_hash = _with_intervention(cfg[dsl], spec)
            for pid in selection.campaign:
                donor = placebo_donor(pid, selection.campaign, selection.family_of) if spec.kind == "placebo" \
                    else None
                if spec.kind == "placebo" and donor is None:
                    raise ExperimentConfigError(
                        f"interventions[{i}]: placebo: {pid} has no other problem of family "
                        f"'{selection.family_of[pid]}' in the campaign to take a SKILL.md from")
                for r in range(config.replicates):
                    control = f"{model}/{pid}/r{r}/{arm_name}"
                    own_source = f"{model}/{pid}/r{r}/{source}"
                    for token in spec.tokens():
                        # What each waits on: the SKILL.md it reads (skill_from), and what sizes its hand-off — the
                        # placebo its own source's length, the budget-matched solo its control's spend.
                        solo = spec.kind == "budget_matched_solo"
                        skill_from = None if solo else (f"{model}/{donor}/r{r}/{source}" if donor else own_source)
                        after: tuple[str, ...] = (control,) if solo else (own_source,) if donor else ()
                        add(Trial(trial_id=f"{control}{SEPARATOR}{token}", model=model, problem_id=pid, dsl=dsl,
                                  target=targets[dsl], arm="solo" if solo else "skill", kind="intervention",
                                  replicate=r, skill_from=skill_from, arm_name=f"{arm_name}{SEPARATOR}{token}",
                                  config_hash=config_hash, problem_hash=problem_hashes[pid], template_hash=template,
                                  after=after))


def _plan_chains(config: ExperimentConfig, model: str, problem_ids: list[str], problem_hashes: dict[str, str],
                 targets: dict[str, str], cfg: dict[str, str], template: str,
                 add: Callable[[Trial], None]) -> None:
    chains = config.chains
    assert chains is not None  # the caller checked
    baselines = config.chain_baselines
    starts = chains.start_dsls
    hop_dsls = {start: [chains.hop_dsl(start, k) for k in range(chains.hops)] for start in starts}
    hop_names = [f"h{k}" for k in range(chains.hops)]
    ungated = len(starts) * chains.per_cell
    variants = config.chain_variants
    variant_cfg = [{dsl: _with_intervention(cfg[dsl], spec) for dsl in cfg} for _, spec in variants]
    for pid in problem_ids:
        phash = problem_hashes[pid]
        for c in range(ungated * (1 + len(variants))):
            twin, g = c % ungated, c // ungated    # g = 0: the plain chain; g >= 1: variant g-1's twin of `twin`
            start = starts[twin // chains.per_cell]
            prefix = f"{chain_id_of(model, pid, c)}/"
            arm_name = f"chain{twin}{SEPARATOR}{variants[g - 1][0]}" if g else None
            hashes = variant_cfg[g - 1] if g else cfg
            previous: Optional[str] = None
            for k, dsl in enumerate(hop_dsls[start]):
                tid = prefix + hop_names[k]
                add(Trial(trial_id=tid, model=model, problem_id=pid, dsl=dsl, target=targets[dsl],
                          arm="skill" if previous else "solo", kind="chain_hop", chain=c, hop=k, skill_from=previous,
                          arm_name=arm_name, config_hash=hashes[dsl], problem_hash=phash, template_hash=template))
                previous = tid
            if g:
                continue    # a gated or probe chain pairs with its twin's baselines
            for dsl in chains.dsls_used(start):
                for r in range(baselines):
                    add(Trial(trial_id=f"{prefix}base_{dsl}_r{r}", model=model, problem_id=pid, dsl=dsl,
                              target=targets[dsl], arm="solo", kind="chain_base", replicate=r, chain=c,
                              config_hash=cfg[dsl], problem_hash=phash, template_hash=template))


def find_stale(plan: Plan, stored: Mapping[str, Sequence[str]], include_dependants: bool = False) -> list[str]:
    """Planned trials whose stored (config_hash, problem_hash, template_hash) differ from the plan's, in plan
    order. Stored ids the plan does not have are ignored. include_dependants: add every trial downstream of a
    stale one (its skill source would change when it is rerun)."""
    stale = []
    for trial in plan.trials:
        hashes = stored.get(trial.trial_id)
        if hashes is not None and tuple(hashes) != (trial.config_hash, trial.problem_hash, trial.template_hash):
            stale.append(trial.trial_id)
    if include_dependants and stale:
        marked = set(stale) | set(plan.descendants(stale))
        stale = [t.trial_id for t in plan.trials if t.trial_id in marked]
    return stale


# ---- estimate ----

# Share of the wall-clock budget an attempt is expected to use: agents stop early when they finish or run out of
# submissions. A planning assumption, not a measurement.
DEFAULT_UTILISATION = 0.5
# Evaluator wall per judged submission on an H200 with the new judge (warm checkers, baselines cached in the run
# directory): median 2.79 s over 9 judgements of CuTe DSL and TIRx solutions; the first judgement of a problem's
# variant in a run also measures its eager baseline: median 19.20 s, i.e. 16.4 s more. Measured by
# benchmarks/evaluator_overhead.py: benchmarks/results/2026-12-01-h200-judge-v2.txt ("new (baselines cached)" and
# "new (baselines measured)" rows).
EVAL_S_PER_SUBMISSION = 2.79
BASELINE_S_PER_PROBLEM_VARIANT = 19.20 - 2.79


@dataclass
class ModelEstimate:
    model: str
    serving: str                      # local_vllm | api
    attempts: int
    attempt_hours: float              # attempts × expected attempt wall
    gpus_per_replica: int
    attempts_per_replica: float       # concurrent attempts one replica serves
    gpu_hours: float                  # 0 for API and CPU-served models


@dataclass
class Estimate:
    """What a campaign is expected to cost — an estimate from the assumptions listed, not a measurement."""

    trials_by_kind: dict[str, int]
    attempts: int
    judged_submissions: float         # expected: counted submissions + the final grading, over all attempts
    model_gpu_hours: float
    evaluator_gpu_hours: float        # GPU-target judging
    evaluator_cpu_hours: float        # CPU-target (TIRx llvm) judging, in CPU-slot hours
    critical_path_hours: float        # the longest dependency path at the expected attempt wall
    per_model: list[ModelEstimate] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    synthetic: bool = False

    @property
    def gpu_hours(self) -> float:
        return self.model_gpu_hours + self.evaluator_gpu_hours


def estimate(plan: Plan, roster: "dict[str, ModelSpec]", config: ExperimentConfig,
             utilisation: float = DEFAULT_UTILISATION, eval_s: float = EVAL_S_PER_SUBMISSION,
             submission_use: float = 1.0) -> Estimate:
    """GPU-hours of running `plan` for real (also for a synthetic campaign: that is what it is for).

    model GPU-hours = attempts × (wall_clock_s × utilisation) × num_gpus / attempts per replica, where attempts per
    replica = the model's concurrency (config override or roster max_concurrency) / max_replicas; API and
    CPU-served models cost no GPU-hours here. evaluator hours = attempts × (submissions × submission_use + 1 final
    grading) × eval_s, plus BASELINE_S_PER_PROBLEM_VARIANT once per (problem, DSL, target) of the plan (a run
    measures each eager baseline once and caches it)."""
    budget = config.budget
    attempt_s = budget.wall_clock_s * utilisation
    judged_per_attempt = budget.submissions * submission_use + 1
    attempts_by_model = Counter(t.model for t in plan.trials)
    per_model = []
    for model, attempts in attempts_by_model.items():
        spec = roster[model]
        per_replica = max(1.0, model_concurrency(config, spec) / spec.max_replicas)
        gpus = spec.num_gpus if spec.is_local else 0
        per_model.append(ModelEstimate(model, spec.serving, attempts, attempts * attempt_s / 3600, spec.num_gpus,
                                       per_replica, attempts * attempt_s * gpus / per_replica / 3600))
    gpu_judged = sum(1 for t in plan.trials if t.target == "gpu")
    cpu_judged = len(plan.trials) - gpu_judged
    variants = {(t.problem_id, t.dsl, t.target) for t in plan.trials}
    gpu_baselines_s = sum(1 for v in variants if v[2] == "gpu") * BASELINE_S_PER_PROBLEM_VARIANT
    cpu_baselines_s = sum(1 for v in variants if v[2] != "gpu") * BASELINE_S_PER_PROBLEM_VARIANT
    assumptions = [
        "an estimate from planning assumptions, not a measurement",
        f"an attempt uses {utilisation:.0%} of its {budget.wall_clock_s:g} s wall-clock budget "
        f"({attempt_s / 60:.1f} min)",
        f"every attempt makes {judged_per_attempt:g} judged submissions ({submission_use:.0%} of its "
        f"{budget.submissions} counted + 1 final grading)",
        f"one judgement takes {eval_s:g} s of an evaluator, plus {BASELINE_S_PER_PROBLEM_VARIANT:.1f} s once per "
        f"problem variant for its eager baseline (the new judge on an H200, baselines cached per run: "
        f"benchmarks/results/2026-12-01-h200-judge-v2.txt); CPU-target judgements counted in CPU-slot hours at "
        f"the same rate",
        "a model replica serves (concurrency / max_replicas) attempts at once; API and CPU-served models cost no "
        "GPU-hours (API cost is per token and not estimated here)",
        "GPU-target trials priced as judged on an H200 (where there is no GPU they are compile-only and cheaper)",
        "queue waits, retries and server start-up are not included",
    ]
    if plan.synthetic:
        assumptions.append("synthetic campaign: the estimate is for running it for real")
    return Estimate(
        trials_by_kind=plan.counts_by_kind(), attempts=len(plan.trials),
        judged_submissions=len(plan.trials) * judged_per_attempt,
        model_gpu_hours=sum(m.gpu_hours for m in per_model),
        evaluator_gpu_hours=(gpu_judged * judged_per_attempt * eval_s + gpu_baselines_s) / 3600,
        evaluator_cpu_hours=(cpu_judged * judged_per_attempt * eval_s + cpu_baselines_s) / 3600,
        critical_path_hours=plan.depth() * attempt_s / 3600,
        per_model=per_model, assumptions=assumptions, synthetic=plan.synthetic)
