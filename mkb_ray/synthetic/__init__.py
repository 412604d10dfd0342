"""Synthetic mode: calibrated random draws in place of model servers and judges, labelled synthetic everywhere.

`synthetic_outcome(trial, source_skill, spec)` hands the scheduler a TrialOutcome as a real attempt would, in tens
of microseconds; its SKILL.md carries ground-truth claim lineage (`parse_skill`) so lineage metrics can be checked
against known copy/paraphrase/drop/strengthen/weaken/merge/split rates (`SyntheticSpec.evolution`).
`planted.planted_rates(spec, models, margin)` derives the paired rates a spec plants (T, H, standing, closure
enrichment, reverse coupling) from the spec alone, for checking an analysis against (imported on its own: numpy).
"""
from __future__ import annotations

from .claims import ClaimContext, SyntheticClaim, evolve, fresh_claims
from .outcome_draw import synthetic_outcome, tier_probabilities
from .skill_md import parse_skill, render_skill, strip_ground_truth
from .spec import SyntheticSpec

__all__ = ["SyntheticSpec", "synthetic_outcome", "render_skill", "parse_skill", "evolve", "fresh_claims",
           "SyntheticClaim", "ClaimContext", "tier_probabilities", "strip_ground_truth"]
