"""The experiment config: one campaign YAML (`experiments/<slug>.yaml`) validated into an `ExperimentConfig`.

A campaign is models × problems × (benchmark arms and/or chains) × replicates under one budget. Every level is a
pydantic model with `extra="forbid"`, and `load_experiment` turns any mistake into one `ExperimentConfigError`
line naming the file and the dotted field (`experiments/x.yaml: chains.hops: Input should be greater than 0`).
A YAML may include one other file with `base: <path>` (relative to the including file): mappings are merged key by
key, recursively, the including file winning; lists and scalars are replaced whole. The base file may not itself
have a `base:`.

Loading also checks what the YAML refers to by name: models against the roster, problem ids, families and globs
against the problems root. Relative paths in the YAML (`roster_dir`, `problems.root`) are relative to the file
that names them and are stored resolved; `run_dir` (default `runs/<name>`) is relative to where `mkb` runs.
"""
from __future__ import annotations

import copy
import fnmatch
import hashlib
import json
import re
from dataclasses import dataclass, field as dc_field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Iterable, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..claims.taxonomy import DEFAULT_TAXONOMY
from ..problems import FAMILIES
from ..records import BudgetSpec
from ..records.intervention import PLAIN_TOKENS, GateMode, ablation_token, gate_token, probe_token
from ..synthetic.plant import planted_closure
from ..synthetic.spec import SyntheticSpec

if TYPE_CHECKING:
    from ..models.roster import ModelSpec
    from ..problems import ProblemSet

EXPERIMENT_SCHEMA_VERSION = 1
BENCHMARK_ARMS = ("solo_cutedsl", "solo_tirx", "cutedsl2tirx_skill", "tirx2cutedsl_skill")
DSLS = ("cutedsl", "tirx")
SYNTHETIC_FAMILY = "synthetic"

SKILL_ARMS = ("cutedsl2tirx_skill", "tirx2cutedsl_skill")

Arm = Literal["solo_cutedsl", "solo_tirx", "cutedsl2tirx_skill", "tirx2cutedsl_skill"]
SkillArm = Literal["cutedsl2tirx_skill", "tirx2cutedsl_skill"]
Family = Literal["attention", "kv_cache", "mlp_norm", "moe", "quantization", "linear_attention"]


class ExperimentConfigError(ValueError):
    """An experiment YAML that does not parse, validate or resolve; one line naming the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProblemFilter(_Strict):
    """Which problems: the union of the ids, the families and the glob matches; nothing given = all of them."""

    ids: list[str] = Field(default_factory=list, description="problem ids, <family>/<NN_name>")
    families: list[Family] = Field(default_factory=list, description="every problem of these families")
    globs: list[str] = Field(default_factory=list, description="fnmatch patterns on problem ids, e.g. 'moe/*'")

    @property
    def selects_all(self) -> bool:
        return not (self.ids or self.families or self.globs)


class ProblemSelector(ProblemFilter):
    """The campaign's problems: a filter over a problems root, or N synthetic problem ids."""

    root: Optional[Path] = Field(None, description="an external problems root (e.g. an MKB checkout); "
                                                   "default: the problems shipped with mkb-ray")
    synthetic: Optional[int] = Field(None, gt=0, description="N synthetic ids synthetic/<family>_<k>, cycling "
                                                             "through the six families (synthetic campaigns only)")

    @model_validator(mode="after")
    def _synthetic_alone(self) -> "ProblemSelector":
        if self.synthetic is not None and (self.root is not None or not self.selects_all):
            raise ValueError("synthetic: replaces the problem set; it cannot be combined with "
                             "ids, families, globs or root")
        return self


class BenchmarkSpec(_Strict):
    """The benchmark arms, planned per model × problem × replicate. A skill arm whose source solo arm is not
    listed still plans that solo arm (a skill attempt needs its source)."""

    arms: list[Arm] = Field(default_factory=lambda: list(BENCHMARK_ARMS), min_length=1)

    @field_validator("arms")
    @classmethod
    def _unique(cls, arms: list[str]) -> list[str]:
        if len(set(arms)) != len(arms):
            raise ValueError("an arm is listed twice")
        return arms


class ChainSpec(_Strict):
    """Skill chains, planned per model × problem: hop 0 solo, hop k conditioned on hop k-1's SKILL.md.

    Chain indexes run over start DSLs first: with `start_dsl: both` and `per_cell: n`, chains 0..n-1 start in
    CuTe DSL and chains n..2n-1 in TIRx."""

    hops: int = Field(gt=0, description="attempts per chain, hop 0 included")
    start_dsl: Literal["cutedsl", "tirx", "both"] = Field(
        "cutedsl", description="the DSL of hop 0; both: one set of per_cell chains from each DSL")
    pattern: Literal["alternate", "same"] = Field(
        "alternate", description="alternate: cutedsl→tirx→cutedsl…; same: every hop in the start DSL")
    per_cell: int = Field(1, gt=0, description="chains per (model, problem, start DSL)")
    baselines: Optional[int] = Field(
        None, ge=0, description="solo replicates per chain and per DSL its hops use, for paired comparison with "
                                "the hops; default: the campaign's replicates; 0: none")
    problems: Optional[ProblemFilter] = Field(
        None, description="chain only these of the campaign's problems; default: all of them")

    @property
    def start_dsls(self) -> tuple[str, ...]:
        return DSLS if self.start_dsl == "both" else (self.start_dsl,)

    def hop_dsl(self, start: str, hop: int) -> str:
        if self.pattern == "same" or hop % 2 == 0:
            return start
        return DSLS[1 - DSLS.index(start)]

    def dsls_used(self, start: str) -> tuple[str, ...]:
        """The DSLs of a chain's hops, the start DSL first."""
        if self.pattern == "same" or self.hops == 1:
            return (start,)
        return (start, DSLS[1 - DSLS.index(start)])


class _Intervention(_Strict):
    """One intervention arm (records/intervention.py): planned per model × problem × replicate beside each skill arm
    in `arms` (its control, planned too, with its source solo, whether or not `benchmark.arms` lists it)."""

    arms: list[SkillArm] = Field(default_factory=lambda: list(SKILL_ARMS), min_length=1,
                                 description="the skill arms it is a twin of")

    def tokens(self) -> list[str]:
        """The arm-name tokens this intervention plans, one trial per token per skill arm."""
        return [PLAIN_TOKENS[self.kind]]  # type: ignore[attr-defined]

    @property
    def on_benchmark(self) -> bool:
        return True


class ClaimAblation(_Intervention):
    """The skill arm rerun with one category of claims (as `annotator` reads them), or the claim at one position,
    cut from its source SKILL.md. A source without such a claim hands on its SKILL.md unchanged: that trial is not
    run (stored skipped, `identical_hand_off`)."""

    kind: Literal["claim_ablation"]
    categories: list[str] = Field(default_factory=list, description="one arm per category of the taxonomy")
    claims: int = Field(0, ge=0, le=64, description="also one arm per claim position 0..claims-1")
    annotator: Literal["offline", "learned"] = Field(
        "offline", description="who reads the claims' categories (a local annotator: it runs in the driver)")
    taxonomy: str = Field(DEFAULT_TAXONOMY, description="the taxonomy the categories are from")

    @model_validator(mode="after")
    def _something(self) -> "ClaimAblation":
        if not self.categories and not self.claims:
            raise ValueError("categories: name at least one category, or set claims: N")
        from ..claims.taxonomy import load_taxonomy

        names = load_taxonomy(self.taxonomy).names
        unknown = [c for c in self.categories if c not in names]
        if unknown:
            raise ValueError(f"categories: {', '.join(unknown)} not in taxonomy {self.taxonomy} "
                             f"({', '.join(names)})")
        if len(set(self.categories)) != len(self.categories):
            raise ValueError("categories: a category is listed twice")
        return self

    def tokens(self) -> list[str]:
        return [ablation_token(category=c) for c in self.categories] + \
            [ablation_token(claim=i) for i in range(self.claims)]


class _ChainTwinnable(_Intervention):
    """An intervention that can also give every chain a twin (each hop k >= 1 reading through it)."""

    benchmark: bool = Field(True, description="a twin of the benchmark's skill arms")
    chains: bool = Field(False, description="a twin of every chain (needs `chains:`)")

    @property
    def on_benchmark(self) -> bool:
        return self.benchmark


class Placebo(_Intervention):
    """A SKILL.md of another problem of the same family (the next one of the campaign's problems, cyclically; same
    model, replicate and source DSL), trimmed to the length of the control's source SKILL.md."""

    kind: Literal["placebo"]


class BudgetMatchedSolo(_Intervention):
    """A solo attempt in the skill arm's target DSL given, on top of the budget, the time and tokens the control
    spent reading its skill: its skill's share of the control's prompt tokens, and that share of its model time."""

    kind: Literal["budget_matched_solo"]


class Episodic(_ChainTwinnable):
    """Excerpts of the source attempt's own transcript and verdicts instead of its distilled SKILL.md, trimmed to
    the SKILL.md's length. `chains`: an episodic twin of every chain, each hop k >= 1 reading hop k-1's episodes —
    does repeated distillation decay where episodes do not?"""

    kind: Literal["episodic"]


class VerificationGate(_ChainTwinnable):
    """Before hand-off, the claims the support reading (claims/support.py: the source attempt's own verdicts)
    does not back are removed (`remove`) or marked "unverified — test before relying on it" (`mark`). `benchmark`:
    a gated twin of each skill arm; `chains`: a gated twin of every chain, gated at every hop."""

    kind: Literal["verification_gate"]
    mode: GateMode = "remove"

    def tokens(self) -> list[str]:
        return [gate_token(self.mode)]


# The default planted closure: false for every problem of the suite (each has a solution faster than eager) and the
# claim the synthetic probe plants, so real and synthetic probes look for the same words.
PLANTED_CLOSURE = planted_closure().text


class ContainmentProbe(_Intervention):
    """Chains seeded with a planted false closure: for each chain, a twin per entry of `gates` whose hop 1 reads hop
    0's SKILL.md with `claim` added as its last item (with a gate, every hop k >= 1 then reads through it). The
    report gives the share of probe chains whose SKILL.md at hop `within` no longer holds the claim (a match at the
    lineage matcher's one-sided threshold), beside the plain chains' share of the same claim (none)."""

    kind: Literal["containment_probe"]
    name: str = Field("", pattern=r"^[a-z0-9]*$", description="names the probe when a campaign has several (e.g. "
                                                               "'gaming'); '' for one")
    claim: str = Field(PLANTED_CLOSURE, min_length=10, description="the planted false closure (synthetic campaigns "
                                                                   "plant synthetic/plant.py's, the same words)")
    gates: list[Literal["none", "remove", "mark"]] = Field(default_factory=lambda: ["none", "remove"], min_length=1,
                                                           description="one probe chain per entry")
    within: int = Field(3, ge=1, description="k: the claim is contained when hop k's SKILL.md no longer holds it")

    @field_validator("gates")
    @classmethod
    def _distinct(cls, gates: list[str]) -> list[str]:
        if len(set(gates)) != len(gates):
            raise ValueError("a gate is listed twice")
        return gates

    def tokens(self) -> list[str]:
        return [probe_token(None if g == "none" else g, self.name) for g in self.gates]  # type: ignore[arg-type]

    @property
    def on_benchmark(self) -> bool:
        return False


InterventionSpec = Annotated[Union[ClaimAblation, Placebo, BudgetMatchedSolo, Episodic, VerificationGate,
                                   ContainmentProbe], Field(discriminator="kind")]


class SchedulerSpec(_Strict):
    """How the campaign is run; none of it changes what an attempt does (so none of it is in trial hashes)."""

    max_trial_retries: int = Field(2, ge=0, description="reruns of a crashed trial before it is recorded as an "
                                                        "infrastructure error")
    evaluator_slots: int = Field(1, ge=1, description="concurrent judgements on CPU evaluators")
    evaluator_devices: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="where kernels are judged; auto: every GPU of the cluster, else CPU slots")
    model_concurrency: dict[str, int] = Field(
        default_factory=dict, description="roster name → attempts talking to it at once (overrides the "
                                          "roster's max_concurrency)")
    model_devices: Literal["roster", "cuda"] = Field(
        "roster", description="where our model servers run: roster (each model's num_gpus), or cuda (every local "
                              "model on GPUs, CPU-roster ones too: the embedded SmolLM2 on a GPU host)")
    model_gpu_fraction: float = Field(
        1.0, gt=0, le=1, description="share of each GPU a model replica asks for; below 1, each GPU evaluator asks "
                                     "for the rest, so a one-GPU host serves the model and judges on that one GPU "
                                     "(the judge's device lock orders judgements, not the model's decoding: its "
                                     "timings are then noisier)")
    attempts_per_eval_slot: int = Field(
        8, ge=1, description="attempts in flight per evaluator judgement slot: bounds dispatch by the "
                             "evaluators' capacity as well as the models' (an attempt spends most of its budget "
                             "with the model; ~10 submissions of ~20 s of judging each on a GPU)")
    placement: Literal["auto", "local", "roles"] = Field(
        "auto", description="where work runs: local (plain CPUs/GPUs) or roles (each role asks for its node "
                            "group's resource: mkb_agent_cpu, mkb_eval_gpu, mkb_model_gpu; see "
                            "experiments/clusters/); auto: roles on a cluster that offers mkb_agent_cpu")

    @field_validator("model_concurrency")
    @classmethod
    def _positive(cls, value: dict[str, int]) -> dict[str, int]:
        bad = [name for name, n in value.items() if n < 1]
        if bad:
            raise ValueError(f"must be at least 1 (for {', '.join(bad)})")
        return value


class ExperimentConfig(_Strict):
    """One campaign, resolved (base merged, paths absolute). Saved with every run."""

    schema_version: Literal[1] = EXPERIMENT_SCHEMA_VERSION
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="campaign slug; names the run dir")
    description: str = ""
    roster_dir: Optional[Path] = Field(None, description="model roster directory; default experiments/models")
    models: list[str] = Field(min_length=1, description="roster names")
    problems: ProblemSelector = Field(default_factory=ProblemSelector)
    replicates: int = Field(1, ge=1, description="benchmark replicates per model × problem × arm")
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    agent: Literal["auto", "workspace", "chat"] = Field(
        "auto", description="auto: the workspace agent for models that call tools, else the chat agent")
    benchmark: Optional[BenchmarkSpec] = None
    chains: Optional[ChainSpec] = None
    interventions: list[InterventionSpec] = Field(
        default_factory=list, description="intervention arms (claim_ablation, placebo, budget_matched_solo, "
                                          "episodic, verification_gate, containment_probe): twins of the skill arms "
                                          "or of the chains, paired with them")
    target: Literal["auto", "gpu", "cpu"] = Field(
        "auto", description="the TIRx variant: gpu, cpu (llvm), or auto (cpu on a machine without a GPU). "
                            "CuTe DSL is always the GPU variant, judged compile-only where there is no GPU")
    synthetic: Optional[SyntheticSpec] = Field(None, description="synthetic mode: calibrated random draws "
                                                                 "replace models and GPUs")
    scheduler: SchedulerSpec = Field(default_factory=SchedulerSpec)
    protocol: Literal["mkb-ray", "mkb"] = Field(
        "mkb-ray", description="grading protocol: mkb-ray (this judge) or mkb (MetaKernelBench's: no L2 flush, no "
                               "outlier draws, the global tolerance rule only, and queue wait counted against the "
                               "attempt clock) to compare with the paper like for like")
    run_dir: Optional[Path] = Field(None, description="default runs/<name>")

    @field_validator("models")
    @classmethod
    def _unique_models(cls, models: list[str]) -> list[str]:
        if len(set(models)) != len(models):
            raise ValueError("a model is listed twice")
        return models

    @field_validator("interventions")
    @classmethod
    def _distinct_interventions(cls, value: list[Any]) -> list[Any]:
        seen: dict[tuple[str, str], int] = {}
        for i, spec in enumerate(value):
            for arm in spec.arms:
                for token in spec.tokens():
                    if (arm, token) in seen:
                        raise ValueError(f"the arm {arm}~{token} is planned by interventions[{seen[arm, token]}] "
                                         f"and interventions[{i}]")
                    seen[arm, token] = i
        return value

    @model_validator(mode="after")
    def _consistent(self) -> "ExperimentConfig":
        if self.benchmark is None and self.chains is None and not any(i.on_benchmark for i in self.interventions):
            raise ValueError("benchmark: a campaign needs benchmark arms, chains or interventions")
        for i, spec in enumerate(self.interventions):
            if isinstance(spec, _ChainTwinnable) and spec.chains and self.chains is None:
                raise ValueError(f"interventions[{i}].chains: twin chains need a `chains:` section to twin")
            if isinstance(spec, ContainmentProbe) and (self.chains is None or self.chains.hops < 2):
                raise ValueError(f"interventions[{i}].kind: a containment probe plants into hop 1 of the chains: it "
                                 f"needs a `chains:` section of at least 2 hops")
            if isinstance(spec, _ChainTwinnable) and not (spec.chains or spec.benchmark):
                raise ValueError(f"interventions[{i}].benchmark: an intervention on neither the benchmark nor the "
                                 f"chains plans nothing")
        if self.problems.synthetic is not None and self.synthetic is None:
            raise ValueError("problems.synthetic: synthetic problem ids need a synthetic campaign "
                             "(add `synthetic: {}`)")
        if self.protocol == "mkb" and not self.budget.count_queue_wait:
            # MetaKernelBench's budget is plain wall clock: time spent waiting for a busy judge counts.
            self.budget = self.budget.model_copy(update={"count_queue_wait": True})
        if self.run_dir is None:
            self.run_dir = Path("runs") / self.name
        return self

    @property
    def is_synthetic(self) -> bool:
        return self.synthetic is not None

    @property
    def benchmark_interventions(self) -> list[Any]:
        return [i for i in self.interventions if i.on_benchmark]

    @property
    def chain_variants(self) -> list[tuple[str, Any]]:
        """(token, spec) of every twin each chain gets, in config order: the gated and the episodic twins of the
        interventions with `chains: true`, and the containment probes' chains."""
        return [(token, i) for i in self.interventions
                if (isinstance(i, _ChainTwinnable) and i.chains) or isinstance(i, ContainmentProbe)
                for token in i.tokens()]

    @property
    def chain_baselines(self) -> int:
        if self.chains is None:
            return 0
        return self.replicates if self.chains.baselines is None else self.chains.baselines


# ---- resolution helpers (used by the planner, the scheduler and `mkb plan`) ----

def resolve_target(dsl: str, config: ExperimentConfig, has_gpu: bool) -> Literal["gpu", "cpu"]:
    """The variant a trial in `dsl` is posed for. CuTe DSL: always gpu (judged compile-only without a GPU).
    TIRx: the config's target; `auto` is gpu where there is a GPU, else the CPU (llvm) variant."""
    if dsl == "cutedsl":
        return "gpu"
    if config.target == "auto":
        return "gpu" if has_gpu else "cpu"
    return config.target


def describe_target(dsl: str, config: ExperimentConfig, has_gpu: bool) -> str:
    """resolve_target in words, for `mkb plan`."""
    target = resolve_target(dsl, config, has_gpu)
    if target == "cpu":
        return "cpu (llvm: runs and is timed on this CPU)"
    return "gpu" if has_gpu else "gpu (compile-only here: no GPU on this machine)"


def resolve_agent(config: ExperimentConfig, spec: "ModelSpec") -> Literal["workspace", "chat"]:
    """The agent for one model: `auto` gives the workspace agent to models that call tools."""
    if config.agent == "auto":
        return "workspace" if spec.supports_tools else "chat"
    return config.agent


def model_concurrency(config: ExperimentConfig, spec: "ModelSpec") -> int:
    """Attempts that may talk to `spec` at once: the config's override, else the roster's max_concurrency."""
    return config.scheduler.model_concurrency.get(spec.name, spec.max_concurrency)


def config_hash(config: ExperimentConfig) -> str:
    """sha256 of the canonical JSON of the resolved config (what a run directory was made from)."""
    canonical = json.dumps(config.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def synthetic_problem_ids(n: int) -> list[str]:
    """`synthetic/<family>_<k>` for i < n: family i mod 6 (FAMILIES order), k = i div 6."""
    return [f"{SYNTHETIC_FAMILY}/{FAMILIES[i % len(FAMILIES)]}_{i // len(FAMILIES)}" for i in range(n)]


def synthetic_family(problem_id: str) -> str:
    """The family a synthetic problem id stands for (`synthetic/moe_3` → `moe`)."""
    return problem_id.split("/", 1)[1].rsplit("_", 1)[0]


def _apply_filter(flt: ProblemFilter, ids: list[str], family_of: dict[str, str], field: str,
                  errors: list[tuple[str, str]]) -> list[str]:
    """The ids (in their given order) that `flt` selects; an id, family or glob that selects nothing is an error."""
    if flt.selects_all:
        return list(ids)
    known = set(ids)
    chosen: set[str] = set()
    for i, pid in enumerate(flt.ids):
        if pid in known:
            chosen.add(pid)
        else:
            shown = ", ".join(ids[:6]) + (", ..." if len(ids) > 6 else "")
            errors.append((f"{field}.ids[{i}]", f"unknown problem '{pid}' (known: {shown})"))
    for i, family in enumerate(flt.families):
        members = [pid for pid in ids if family_of.get(pid) == family]
        if not members:
            errors.append((f"{field}.families[{i}]", f"no problem of family '{family}'"))
        chosen.update(members)
    for i, pattern in enumerate(flt.globs):
        members = fnmatch.filter(ids, pattern)
        if not members:
            errors.append((f"{field}.globs[{i}]", f"'{pattern}' matches no problem"))
        chosen.update(members)
    return [pid for pid in ids if pid in chosen]


@dataclass
class ProblemSelection:
    """What a config's selectors resolve to: ordered problem ids, their families and, for real ones, files."""

    campaign: list[str]                  # the campaign's problem ids, in problems-root order
    chains: list[str]                    # the subset that chains run on
    family_of: dict[str, str]
    paths: dict[str, Path] = dc_field(default_factory=dict)   # problem id → problem file (real problems only)
    cuda_pinned: dict[str, list[int]] = dc_field(default_factory=dict)  # id → make_inputs() lines on CUDA


def _select(config: ExperimentConfig, problems: "ProblemSet | None",
            errors: list[tuple[str, str]]) -> ProblemSelection:
    selector = config.problems
    if selector.synthetic is not None:
        universe = synthetic_problem_ids(selector.synthetic)
        family_of = {pid: synthetic_family(pid) for pid in universe}
        paths: dict[str, Path] = {}
        pinned: dict[str, list[int]] = {}
        campaign = universe
    else:
        if problems is None:
            from ..problems import load_problems

            try:
                problems = load_problems(selector.root)
            except FileNotFoundError as err:
                errors.append(("problems.root", str(err)))
                return ProblemSelection(campaign=[], chains=[], family_of={})
        universe = [p.problem_id for p in problems.problems]
        family_of = {p.problem_id: p.family for p in problems.problems}
        paths = {p.problem_id: p.path for p in problems.problems}
        pinned = {p.problem_id: p.cuda_pins for p in problems.problems if p.cuda_pins}
        campaign = _apply_filter(selector, universe, family_of, "problems", errors)
    if not campaign and not errors:
        errors.append(("problems", "selects no problem"))
    chains = campaign
    if config.chains is not None and config.chains.problems is not None:
        chains = _apply_filter(config.chains.problems, campaign, family_of, "chains.problems", errors)
    return ProblemSelection(campaign=campaign, chains=chains, family_of=family_of,
                            paths={pid: paths[pid] for pid in campaign if pid in paths},
                            cuda_pinned={pid: pinned[pid] for pid in campaign if pid in pinned})


def _reference_errors(config: ExperimentConfig, roster: "dict[str, ModelSpec]") -> list[tuple[str, str]]:
    errors: list[tuple[str, str]] = []
    names = ", ".join(sorted(roster))
    for i, model in enumerate(config.models):
        if model not in roster:
            errors.append((f"models[{i}]", f"unknown model '{model}' (roster: {names})"))
    for model in config.scheduler.model_concurrency:
        if model not in roster:
            errors.append((f"scheduler.model_concurrency.{model}", f"unknown model '{model}' (roster: {names})"))
    return errors


def _raise(errors: list[tuple[str, str]], file_of=lambda field: None) -> None:
    if errors:
        parts = []
        for field, message in errors:
            file = file_of(field)
            parts.append(f"{file}: {field}: {message}" if file else f"{field}: {message}")
        raise ExperimentConfigError("; ".join(parts))


def select_problems(config: ExperimentConfig, problems: "ProblemSet | None" = None) -> ProblemSelection:
    """The campaign's problem ids (and the chained subset), in problems-root order; unknown ids, families or
    globs that match nothing raise ExperimentConfigError naming the field. `problems` None: load the config's
    root (or the shipped problems)."""
    errors: list[tuple[str, str]] = []
    selection = _select(config, problems, errors)
    _raise(errors)
    return selection


def check_references(config: ExperimentConfig, roster: "dict[str, ModelSpec]",
                     problems: "ProblemSet | None" = None) -> ProblemSelection:
    """Models and problems the config names must exist; returns the problem selection."""
    errors = _reference_errors(config, roster)
    selection = _select(config, problems, errors)
    _raise(errors)
    return selection


# ---- loading ----

_FIELD_PREFIX = re.compile(r"^([a-z_][a-z0-9_.]*): ")


def _format_loc(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except OSError as err:
        raise ExperimentConfigError(f"{path}: cannot read: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ExperimentConfigError(f"{path}: invalid YAML{where}: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ExperimentConfigError(f"{path}: expected a mapping of fields, got {type(data).__name__}")
    return data


def _resolve_paths(data: dict[str, Any], base_dir: Path) -> None:
    """Make the YAML's file-relative paths absolute, in place (before merging, so each file's paths stay its own)."""
    if isinstance(data.get("roster_dir"), str):
        data["roster_dir"] = str((base_dir / data["roster_dir"]).resolve())
    problems = data.get("problems")
    if isinstance(problems, dict) and isinstance(problems.get("root"), str):
        problems["root"] = str((base_dir / problems["root"]).resolve())


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _has_path(data: Any, field: str) -> bool:
    """Whether the dotted/indexed field path (as _format_loc writes it) starts inside `data`'s top-level key."""
    head = field.split(".", 1)[0].split("[", 1)[0]
    return isinstance(data, dict) and head in data


def load_experiment(path: Path | str, roster_dir: Path | None = None,
                    problems: "ProblemSet | None" = None) -> ExperimentConfig:
    """Read, merge (`base:`), validate and resolve an experiment YAML.

    roster_dir: overrides the config's `roster_dir` (tests); problems: an already loaded problem set to check the
    selector against (default: load the config's root). Raises ExperimentConfigError.
    """
    from ..models.roster import RosterError, load_roster

    path = Path(path)
    data = _read_yaml(path)
    _resolve_paths(data, path.parent)
    base_path: Optional[Path] = None
    base_data: dict[str, Any] = {}
    if "base" in data:
        include = data.pop("base")
        if not isinstance(include, str):
            raise ExperimentConfigError(f"{path}: base: a path to another experiment YAML")
        base_path = path.parent / include
        if not base_path.is_file():
            raise ExperimentConfigError(f"{path}: base: no file {base_path}")
        base_data = _read_yaml(base_path)
        if "base" in base_data:
            raise ExperimentConfigError(f"{base_path}: base: at most one include (the base file has its own)")
        _resolve_paths(base_data, base_path.parent)
    merged = _merge(base_data, data)

    def file_of(field: str) -> Path:
        if base_path is not None and not _has_path(data, field) and _has_path(base_data, field):
            return base_path
        return path

    try:
        config = ExperimentConfig.model_validate(merged)
    except ValidationError as err:
        errors = []
        for e in err.errors():
            message = "unknown field (typo?)" if e["type"] == "extra_forbidden" else e["msg"]
            message = message.removeprefix("Value error, ")
            field = _format_loc(e["loc"])
            named = _FIELD_PREFIX.match(message)
            if named:  # cross-field checks name their field, relative to where they run
                field = f"{field}.{named.group(1)}" if field else named.group(1)
                message = message[named.end():]
            errors.append((field or "(config)", message))
        _raise(errors, file_of)
        raise  # unreachable: _raise raised
    try:
        roster = load_roster(roster_dir or config.roster_dir)
    except RosterError as err:
        raise ExperimentConfigError(f"{file_of('roster_dir')}: roster_dir: {err}") from None
    errors = _reference_errors(config, roster)
    _select(config, problems, errors)
    _raise(errors, file_of)
    return config
