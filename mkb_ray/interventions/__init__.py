"""Intervention arms: pure text transforms of what one attempt hands the next.

    edit.py      cut claims out of a SKILL.md, label them unverified, or trim it to a length (the placebo)
    gate.py      the verification gate: remove or mark every claim the source attempt's verdicts do not support
    episodic.py  the episodic-memory arm: the source attempt's verdicts and reply excerpts instead of its SKILL.md

No store, no Ray, no network: each function maps text (and a record) to text, deterministically, so an arm's
hand-off can be rebuilt from the stored source at any time.
"""
from __future__ import annotations

from .edit import UNVERIFIED_LABEL, mark_claims, remove_claims, trim_to_length
from .episodic import EPISODES_TITLE, episodic_text, replies_before_submissions
from .gate import GATE_MODES, ClaimSupport, GateMode, GateResult, gate_skill

__all__ = ["remove_claims", "mark_claims", "trim_to_length", "UNVERIFIED_LABEL", "gate_skill", "GateResult",
           "ClaimSupport", "GateMode", "GATE_MODES", "episodic_text", "replies_before_submissions", "EPISODES_TITLE"]
