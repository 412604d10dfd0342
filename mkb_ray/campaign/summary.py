"""What `mkb run` summarises after a campaign: final tiers per model and arm, skills written, what is synthetic.

Reads the store only (a stored run can be summarised again with `mkb run CONFIG` on a finished campaign); the
table itself is printed by `mkb_ray.cli.run`.
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..records import hop_bucket
from ..records.intervention import chain_variant

TIER_COLUMNS = ("fail", "pass", "pass2x", "compile_only", "none")


@dataclass
class RunSummary:
    """Counts over the stored trials of one run."""

    trials: int = 0
    statuses: Counter = field(default_factory=Counter)
    tiers: dict[tuple[str, str], Counter] = field(default_factory=lambda: defaultdict(Counter))
    skills_written: int = 0          # trials that left a non-empty SKILL.md
    synthetic: int = 0
    targets: Counter = field(default_factory=Counter)
    real_judge: bool = False         # synthetic agent, real judge (synthetic: {judge: real})


def group_of(row: Any) -> str:
    """The row's arm for reporting: the benchmark or intervention arm name, `chain h<k> (<dsl>)` (followed by the
    twin's token for a chain twin's hops: `gate-remove`, `episodic`, `probe`...), or `chain base (<dsl>)`."""
    if row.kind in ("benchmark", "intervention"):
        return row.arm_name or f"{row.arm}_{row.dsl}"
    if row.kind == "chain_hop":
        hops = hop_bucket(row.hop)[1]   # a 100-hop chain would otherwise print 100 rows
        twin = chain_variant(row.arm_name)   # a chain twin's token: gate-remove, episodic, probe...
        return f"chain h{hops} ({row.dsl})" + (f" {twin}" if twin else "")
    return f"chain base ({row.dsl})"


def summarise(store: Any) -> RunSummary:
    summary = RunSummary()
    config = json.loads(store.meta().get("config_json") or "{}")
    summary.real_judge = (config.get("synthetic") or {}).get("judge") == "real"
    skill_bytes = store.skill_sizes()
    for row in store.trial_rows():
        summary.trials += 1
        summary.statuses[row.status] += 1
        if row.status == "planned":
            continue
        summary.tiers[(row.model, group_of(row))][row.final_tier or "none"] += 1
        summary.skills_written += 1 if skill_bytes.get(row.trial_id, 0) > 0 else 0
        summary.synthetic += 1 if row.synthetic else 0
        synthetic_draw = row.synthetic and not summary.real_judge
        summary.targets[(row.dsl, "synthetic" if synthetic_draw else row.target)] += 1
    return summary


def target_notes(summary: RunSummary, has_gpu: bool) -> list[str]:
    """What 'executed' means for this run's variants on this machine — said plainly, next to the numbers."""
    notes = []
    for (dsl, target), n in sorted(summary.targets.items()):
        if target == "synthetic":
            notes.append(f"{dsl}: {n} synthetic trial(s): tiers drawn from the calibration, nothing compiled or run")
        elif target == "cpu":
            notes.append(f"{dsl}: {n} trial(s) on the CPU-target (LLVM) variant: a submission that compiles is "
                         f"executed and timed on CPU")
        elif has_gpu:
            notes.append(f"{dsl}: {n} trial(s) on the GPU variant: a submission that compiles is executed and timed on "
                         f"the GPU")
        else:
            notes.append(f"{dsl}: {n} trial(s) on the GPU variant with no GPU here: a kernel that compiles to PTX "
                         f"gets tier compile_only (never executed; neither pass nor fail)")
    return notes
