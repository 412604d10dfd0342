"""Intervention arms (issue 29): how a trial that changes what a skill attempt reads is named, and what it hands
the attempt.

An intervention trial is the twin of a benchmark skill arm (its *control*: same model, problem, replicate and
target DSL) with one thing changed. Its arm name is the control's followed by `~` and a token, its trial id the
control's id with that suffix:

    <model>/<problem>/r<k>/<skill arm>~ablate-<category>   the source SKILL.md without the claims of one category
    ...~ablate-claim<i>                                    ... without its i-th claim (0-based)
    ...~placebo                                            a SKILL.md of another problem of the family, trimmed
                                                           to the source SKILL.md's length
    ...~budget_solo                                        a solo in the target DSL given what the control spent
                                                           reading its skill, on top of its budget
    ...~episodic                                           excerpts of the source attempt's transcript and
                                                           verdicts instead of its SKILL.md, same length
    ...~gate-remove | ~gate-mark                           the source SKILL.md after the verification gate

Gated chains are chains whose hops carry the arm name `chain<c>~gate-<mode>`: chain c's gated twin (own hops,
chain c's baselines), each hop k >= 1 reading hop k-1's SKILL.md through the gate. Containment-probe chains carry
`chain<c>~probe[_<name>]` or `chain<c>~probe[_<name>]-gate-<mode>`: chain c's twin whose hop 1 reads hop 0's
SKILL.md with a planted claim added (then, with a gate, every hop k >= 1 reads through it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Optional

# The artifact an intervention trial stores with what it read (the trial task writes it; the report and the
# planted-effect check read it).
HAND_OFF_ARTIFACT = "hand_off.md"
InterventionKind = Literal["claim_ablation", "placebo", "budget_matched_solo", "episodic", "verification_gate",
                           "containment_probe"]
GateMode = Literal["remove", "mark"]
SEPARATOR = "~"

_TOKEN = re.compile(r"^(?:ablate-claim(?P<claim>\d+)|ablate-(?P<category>[a-z][a-z0-9_]*)|(?P<plain>placebo|"
                    r"budget_solo|episodic)|gate-(?P<mode>remove|mark)|"
                    r"(?P<probe>probe)(?:_(?P<name>[a-z0-9]+))?(?:-gate-(?P<probe_mode>remove|mark))?)$")
_CHAIN_TWIN = re.compile(r"^chain(?P<twin>\d+)$")
_KIND_OF_PLAIN: dict[str, InterventionKind] = {"placebo": "placebo", "budget_solo": "budget_matched_solo",
                                               "episodic": "episodic"}


@dataclass(frozen=True, slots=True)
class InterventionRef:
    """One intervention as a trial's arm name states it. `control`: the arm name of the twin it is paired with (a
    benchmark skill arm, or `chain<c>` for a gated chain's hops)."""

    kind: InterventionKind
    token: str
    control: str
    category: Optional[str] = None     # claim_ablation by category
    claim: Optional[int] = None        # claim_ablation by position
    mode: Optional[GateMode] = None    # verification_gate (and a gated containment probe)
    probe: str = ""                    # a containment probe's name ('' for the unnamed one)

    @property
    def arm_name(self) -> str:
        return f"{self.control}{SEPARATOR}{self.token}"

    @property
    def twin_chain(self) -> Optional[int]:
        """The chain index a gated chain's hops are the twin of (None for benchmark interventions)."""
        m = _CHAIN_TWIN.match(self.control)
        return int(m.group("twin")) if m else None

    @property
    def label(self) -> str:
        """The row label of the causal table: what was changed."""
        if self.kind == "claim_ablation":
            return f"ablate {self.category}" if self.category else f"ablate claim {self.claim}"
        if self.kind == "verification_gate":
            return f"gate ({self.mode})"
        if self.kind == "containment_probe":
            name = f"probe {self.probe}" if self.probe else "probe"
            return f"{name}, gate ({self.mode})" if self.mode else f"{name}, no gate"
        return {"placebo": "placebo", "budget_matched_solo": "budget-matched solo", "episodic": "episodic"}[self.kind]


def ablation_token(category: Optional[str] = None, claim: Optional[int] = None) -> str:
    if (category is None) == (claim is None):
        raise ValueError("an ablation removes a category or a claim position, exactly one")
    return f"ablate-claim{claim}" if claim is not None else f"ablate-{category}"


def gate_token(mode: GateMode) -> str:
    return f"gate-{mode}"


def probe_token(mode: Optional[GateMode], name: str = "") -> str:
    return ("probe" + (f"_{name}" if name else "")) + (f"-gate-{mode}" if mode else "")


PLAIN_TOKENS: dict[InterventionKind, str] = {kind: token for token, kind in _KIND_OF_PLAIN.items()}


def is_intervention_arm(arm_name: Optional[str]) -> bool:
    """Whether an arm name states an intervention (a twin's arm, or a chain twin's hop), without parsing it."""
    return bool(arm_name) and SEPARATOR in arm_name  # type: ignore[operator]


def parse_arm(arm_name: Optional[str]) -> Optional[InterventionRef]:
    """The intervention an arm name states, or None for an arm without one (a plain benchmark arm, a chain hop)."""
    if not is_intervention_arm(arm_name):
        return None
    assert arm_name is not None
    control, _, token = arm_name.partition(SEPARATOR)
    m = _TOKEN.match(token)
    if m is None or not control:
        raise ValueError(f"arm name {arm_name!r}: unknown intervention token {token!r}")
    if m.group("claim") is not None:
        return InterventionRef("claim_ablation", token, control, claim=int(m.group("claim")))
    if m.group("category") is not None:
        return InterventionRef("claim_ablation", token, control, category=m.group("category"))
    if m.group("plain") is not None:
        return InterventionRef(_KIND_OF_PLAIN[m.group("plain")], token, control)
    if m.group("probe") is not None:
        return InterventionRef("containment_probe", token, control, mode=m.group("probe_mode"),  # type: ignore[arg-type]
                               probe=m.group("name") or "")
    return InterventionRef("verification_gate", token, control, mode=m.group("mode"))  # type: ignore[arg-type]


def chain_variant(arm_name: Optional[str]) -> str:
    """What kind of chain a hop's arm name says it belongs to: '' for a plain chain, else the token (`gate-remove`,
    `gate-mark`, `probe`, `probe-gate-remove`, ...)."""
    ref = parse_arm(arm_name)
    return ref.token if ref is not None else ""


def control_trial_id(trial_id: str, ref: InterventionRef) -> str:
    """The control's trial id of a benchmark intervention trial (its own id without the `~token` suffix)."""
    suffix = SEPARATOR + ref.token
    if not trial_id.endswith(suffix):
        raise ValueError(f"trial {trial_id!r} does not end in its intervention token {suffix!r}")
    return trial_id[: -len(suffix)]


@dataclass(frozen=True, slots=True)
class HandOff:
    """What an intervention trial is given in place of its source's SKILL.md (built by the scheduler's
    `mkb_ray.interventions.HandOffBuilder`, read by the trial task).

    text: what the attempt reads as its skill ('' for a solo, and for a skill attempt left with nothing to read,
    which is then skipped as an empty source is); extra_wall_s / extra_tokens: budget on top of the campaign's
    (budget-matched solo); note: what was done to the source, kept in the attempt record's notes;
    identical_to: the trial whose hand-off was byte-identical (an ablation that removed nothing): the attempt is
    not run, and is stored skipped with that reason."""

    text: str
    extra_wall_s: float = 0.0
    extra_tokens: int = 0
    note: str = ""
    identical_to: Optional[str] = None
