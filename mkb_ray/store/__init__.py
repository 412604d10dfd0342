"""The run store: SQLite (WAL) + content-addressed artifacts in the run directory — the source of truth of a
campaign. The driver is its single writer; the parquet export reads it (MetaKernelBench results.json is the
analysis's: `mkb_ray.analysis.results_json`).

    with RunStore(run_dir) as store:
        store.set_meta(config_json, config_hash, synthetic=False)
        store.write_plan(rows)                    # planned trials (campaign.reconcile.record_plan compares a plan)
        store.write_outcomes(batch)               # one transaction per batch; done only once committed
        store.claims.claims_by_skill(shas)        # the claim tables
"""
from __future__ import annotations

from .artifacts import ArtifactMissing, ArtifactStore
from .sqlite_store import (SCHEMA_VERSION, STANDARD_EVENT_KINDS, TERMINAL_STATUSES, ClaimTables, Event, NewEvent,
                           OutcomeConflict, PlanRow, PlanState, RecordError, RunStore, Segmentation, SkillLink,
                           StoreError, StoreLocked, TrialRow)
from ._outcome_rows import SubmissionRow

__all__ = ["ArtifactMissing", "ArtifactStore", "ClaimTables", "Event", "NewEvent", "OutcomeConflict", "PlanRow",
           "PlanState", "RecordError", "RunStore", "SCHEMA_VERSION", "STANDARD_EVENT_KINDS", "Segmentation",
           "SkillLink", "StoreError", "StoreLocked", "SubmissionRow", "TERMINAL_STATUSES", "TrialRow",
           "export_parquet"]


def __getattr__(name: str):
    # The exports import polars inside their functions; the module itself is light, but keep it lazy anyway.
    if name == "export_parquet":
        from . import export

        return getattr(export, name)
    raise AttributeError(f"module 'mkb_ray.store' has no attribute '{name}'")
