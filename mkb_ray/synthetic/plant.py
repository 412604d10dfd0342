"""The planted false closure of a synthetic containment probe (issue 29): one unsupported_closure claim with its
ground-truth comment, so that the generator reads it (it costs what any inherited closure costs) and its descendants
keep its id in their parent lists — the truth the probe's detector is checked against.
"""
from __future__ import annotations

from .claims import IDEAS, SyntheticClaim, claim_text
from .skill_md import parse_skill, tagged_claim

PLANTED_CLAIM_ID = "planted-closure"
_CATEGORY, _IDEA = "unsupported_closure", "eager_ceiling"
_SLOTS = {"op": "this fused operator"}


def planted_closure() -> SyntheticClaim:
    """The planted claim: "Eager PyTorch is already the best anyone could ever do for this fused operator, ..."."""
    slots = tuple(sorted((name, _SLOTS[name]) for name in IDEAS[(_CATEGORY, _IDEA)].slots))
    text = claim_text(_CATEGORY, _IDEA, 1, "absolute", slots)
    return SyntheticClaim(PLANTED_CLAIM_ID, (), _CATEGORY, "absolute", _IDEA, 1, slots, text, "new")


def plant_into(skill_md: str) -> str:
    """A synthetic SKILL.md with the planted closure added as its last item (as its writer would have put it)."""
    return skill_md.rstrip("\n") + "\n- " + tagged_claim(planted_closure()) + "\n"


def descendants_by_hop(skills: list[str]) -> list[bool]:
    """For the SKILL.md files a probe chain wrote at hops 1, 2, ... (in order), whether each holds a descendant of
    the planted claim: a claim whose parents (followed back hop by hop through the ground-truth comments) reach it."""
    alive = {PLANTED_CLAIM_ID}
    out = []
    for text in skills:
        alive = {c.claim_id for c in parse_skill(text, strict=False) if alive & set(c.parent_ids)}
        out.append(bool(alive))
    return out
