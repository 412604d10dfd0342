"""The data model, at the bottom of the layers: every typed record the other packages exchange.

It imports nothing of the project, so every package may import it (the store, synthetic mode, agents, the
scheduler, analysis) and none has to reach up into another's package for a type.

    verdict.py       Verdict, CheckResult, Tier: what the judge says about one kernel
    attempt.py       BudgetSpec, AttemptConfig, LLMUsage, LLMCallRecord, SubmissionRecord, AttemptRecord
    trial.py         Trial (one planned attempt), TrialOutcome (what the store keeps of it), StoredArtifact
    intervention.py  InterventionRef, HandOff: intervention arms' names and what they hand an attempt
    dependencies.py  TrialGraph, downstream: the trials' dependency graph (planner, scheduler and store)
"""
from __future__ import annotations

from .attempt import (SCHEMA_VERSION, AttemptConfig, AttemptRecord, AttemptStatus, BudgetSpec, LLMCallRecord,
                      LLMUsage, StopReason, SubmissionRecord)
from .dependencies import TrialGraph, downstream
from .intervention import HandOff, InterventionRef, parse_arm
from .trial import Dsl, StoredArtifact, Target, Trial, TrialOutcome, TrialStatus, chain_id_of, hop_bucket
from .verdict import CheckResult, CompileRecordModel, Tier, Verdict

__all__ = ["SCHEMA_VERSION", "AttemptConfig", "AttemptRecord", "AttemptStatus", "BudgetSpec", "CheckResult",
           "CompileRecordModel", "Dsl", "HandOff", "InterventionRef", "LLMCallRecord", "LLMUsage", "StopReason",
           "StoredArtifact", "SubmissionRecord", "Target", "Tier", "Trial", "TrialGraph", "TrialOutcome",
           "TrialStatus", "Verdict", "chain_id_of", "downstream", "hop_bucket", "parse_arm"]
