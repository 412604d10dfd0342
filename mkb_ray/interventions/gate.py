"""The verification gate: a SKILL.md handed on with only what its source attempt's own verdicts back.

Each claim's support is read against the graded submissions of the attempt that wrote the skill (the rules of
mkb_ray.claims.support: numbers a correct submission measured, failures a verdict shows, closures a faster kernel
refutes). Claims that are not `supported` are removed (mode "remove") or labelled as unverified (mode "mark"); the
arm asks whether the next attempt does better when what nobody checked is out of the way, or flagged.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Optional

from ..claims.segment import segment
from ..claims.support import evidence_from_record, judge_support
from ..records.attempt import AttemptRecord
from ..records.claims import Support
from ..records.intervention import GateMode
from .edit import mark_claims, remove_claims

GATE_MODES: tuple[GateMode, ...] = ("remove", "mark")


class ClaimSupport(NamedTuple):
    """One claim's reading: its 0-based index among the skill's claims, its support and the verdict that decided
    it (judge_support's reason)."""

    index: int
    support: Support
    reason: str


@dataclass(frozen=True)
class GateResult:
    """A gated SKILL.md and what the gate did to it.

    `kept` claims were supported and pass untouched; `removed` and `marked` count the gated ones (one of the two is
    0, by mode); `reasons` holds every claim's reading, in document order, gated or not.
    """

    text: str
    mode: GateMode
    kept: int
    removed: int
    marked: int
    reasons: tuple[ClaimSupport, ...]

    @property
    def gated(self) -> int:
        return self.removed + self.marked


def gate_skill(text: str, record: Optional[AttemptRecord], mode: GateMode) -> GateResult:
    """`text` with every claim its source attempt's record does not support removed or marked (by `mode`).

    Contradicted claims are gated as well as unsupported ones: a claim a verdict refutes ("cannot beat eager" after
    a 2.1x pass) is worse than one nobody checked, and a gate that let it through would hand on exactly the
    confident error it exists to stop. Without a record there is no evidence, so every claim is unsupported and
    gated. A skill with no claims, or none gated, comes back byte-identical.
    """
    if mode not in GATE_MODES:
        raise ValueError(f"gate mode must be one of {GATE_MODES}, not {mode!r}")
    claims = segment(text)
    evidence = evidence_from_record(record) if record is not None else []
    reasons = tuple(ClaimSupport(c.index, j.support, j.reason)
                    for c, j in ((c, judge_support(c.text, evidence)) for c in claims))
    gated = {r.index for r in reasons if r.support != "supported"}
    if mode == "remove":
        out = remove_claims(text, claims, gated)
    else:
        out = mark_claims(text, claims, gated)
    return GateResult(text=out, mode=mode, kept=len(claims) - len(gated),
                      removed=len(gated) if mode == "remove" else 0, marked=len(gated) if mode == "mark" else 0,
                      reasons=reasons)
