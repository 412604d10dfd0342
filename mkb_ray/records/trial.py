"""The unit of a campaign: a `Trial` (one planned attempt) and a `TrialOutcome` (what the store keeps of it).

The planner (`mkb_ray.campaign.plan`) turns an experiment config into trials; the scheduler runs them; the store
writes outcomes.
A trial's id is deterministic, so a rerun of the same config finds the same ids and runs only what is missing:
    benchmark arms   <model>/<problem>/r<k>/<arm>          arm in solo_cutedsl, solo_tirx, cutedsl2tirx_skill, ...
    chain hops       <model>/<problem>/chain<c>/h<k>       hop 0 solo, hop k>=1 conditioned on hop k-1's SKILL.md
    chain baselines  <model>/<problem>/chain<c>/base_<dsl>_r<k>   solo attempts in a hop's DSL, for pairing
    interventions    <model>/<problem>/r<k>/<skill arm>~<token>   a skill arm's twin with one thing changed
                     (records/intervention.py)
Trials are plain frozen dataclasses with slots (not pydantic): a 100-hop campaign plans ~10^5 of them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional, Union

Dsl = Literal["cutedsl", "tirx"]
Target = Literal["gpu", "cpu"]
# Terminal states a trial can be stored with. `completed` / `skipped` / `error` mirror AttemptRecord.status (an
# `error` there is the attempt's own failure, e.g. the model endpoint kept failing); `infra_error` is a trial the
# scheduler gave up on after its bounded retries (the Ray task crashed, the worker died...).
TrialStatus = Literal["completed", "skipped", "error", "infra_error"]


def chain_id_of(model: str, problem_id: str, chain: int) -> str:
    """The id of a chain, `<model>/<problem>/chain<c>`: the prefix of its hops' and baselines' trial ids."""
    return f"{model}/{problem_id}/chain{chain}"


def hop_bucket(hop: int) -> tuple[int, str]:
    """(order, label) of a chain hop where long chains are summarised (the run summary, the report's per-kind hop
    table): hops 0, 1 and 2 alone, then 3-9 and decades (10-19, ...), so that a 100-hop chain is a dozen rows."""
    if hop < 3:
        return hop, str(hop)
    if hop < 10:
        return 3, "3-9"
    return 3 + hop // 10, f"{hop // 10 * 10}-{hop // 10 * 10 + 9}"


@dataclass(frozen=True, slots=True)
class Trial:
    """One planned attempt."""

    trial_id: str
    model: str
    problem_id: str
    dsl: Dsl
    target: Target
    arm: Literal["solo", "skill"]
    kind: Literal["benchmark", "chain_hop", "chain_base", "intervention"]
    replicate: int = 0
    chain: Optional[int] = None          # chain index within its (model, problem) cell
    hop: Optional[int] = None            # 0-based hop within the chain
    skill_from: Optional[str] = None     # trial id whose SKILL.md this skill trial reads (also its dependency)
    arm_name: Optional[str] = None       # benchmark arm name (solo_cutedsl, cutedsl2tirx_skill, ...)
    config_hash: str = ""                # sha256 over what shapes this trial's attempt (model spec, budget, agent)
    problem_hash: str = ""               # sha256 of the problem file + sidecar
    template_hash: str = ""              # sha256 of the agent templates
    after: tuple[str, ...] = ()          # trials it also waits on without reading their SKILL.md (an intervention's
                                         # control: the placebo's length, the budget-matched solo's spend)

    @property
    def depends_on(self) -> tuple[str, ...]:
        head = (self.skill_from,) if self.skill_from else ()
        return head + self.after if self.after else head


@dataclass(frozen=True, slots=True)
class StoredArtifact:
    """An artifact file that the trial's worker already wrote into the run's content-addressed artifact store
    (a cluster run, where every node reaches the run directory): the outcome carries its address, not its bytes,
    so a 256 MB workspace file never passes through the object store or the driver's memory."""

    sha256: str
    size: int


@dataclass(frozen=True, slots=True)
class TrialOutcome:
    """What a finished trial hands the store (the driver is its only writer).

    `record_json` is the AttemptRecord as JSON (None only for an infra_error with no record); `artifacts` maps
    attempt-relative names (final_kernel.py, SKILL.md, transcript.jsonl, submissions/01.py, ...) to their bytes —
    the store writes them content-addressed, so a trial run on another node needs no shared filesystem — or, on a
    cluster run whose nodes share the run directory, to the `StoredArtifact` its worker already wrote.
    """

    trial_id: str
    status: TrialStatus
    record_json: Optional[str]
    artifacts: dict[str, Union[bytes, StoredArtifact]]
    synthetic: bool = False
    attempts: int = 1                    # how many times the scheduler ran it (retries + 1)
    error: Optional[str] = None
    final_tier: Optional[str] = None     # denormalised from the record for fast queries
    skill_md: Optional[str] = None       # the SKILL.md text (also in artifacts), for dependants of this trial
    tokens: int = 0                      # prompt + completion tokens of the attempt (progress display)
