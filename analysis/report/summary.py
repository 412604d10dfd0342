"""A run in five lines, for the terminal: what ran, the tiers per arm, which skills were handed on, what the
claims say, and where the report is. `mkb report` prints it after writing the pages (and so `make run` ends on
it); everything is read from the store, nothing is computed that the report does not also show.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Optional

from ...store import RunStore
from .claims import query_claim_tables, stored_labels

_TIERS = ("pass2x", "pass", "compile_only", "fail")


def run_summary(store: RunStore, index: Optional[Path] = None, annotator: Optional[str] = None,
                taxonomy: Optional[str] = None) -> list[str]:
    """Five lines: trials by status; final tiers per arm; SKILL.md files written and handed on; claims and the
    closures among them (the annotator the report uses: `stored_labels`); the report's path (when given)."""
    con = store.connection
    rows = con.execute("SELECT arm_name, arm, kind, hop, status, final_tier, trial_id FROM trials").fetchall()
    status = Counter(r[4] for r in rows)
    lines = [f"trials: {len(rows)} planned; " + ", ".join(f"{n} {s}" for s, n in sorted(status.items()))]

    tiers: dict[str, Counter[str]] = defaultdict(Counter)
    for arm_name, arm, kind, hop, state, tier, _ in rows:
        label = (f"chain h{hop}" if kind == "chain_hop" else "chain base" if kind == "chain_base"
                 else arm_name or arm)
        if state == "completed":
            tiers[label][tier or "none"] += 1
    parts = [f"{label} " + "/".join(f"{counts[t]} {t}" for t in (*_TIERS, "none") if counts[t])
             for label, counts in sorted(tiers.items())]
    lines.append("final tiers: " + ("; ".join(parts) if parts else "none yet"))

    ran = [r for r in rows if r[4] == "completed"]
    sizes = store.skill_sizes()
    written = sum(1 for r in ran if sizes.get(r[6], 0) > 0)
    receivers = [r for r in rows if r[1] == "skill" or (r[2] == "chain_hop" and (r[3] or 0) >= 1)]
    handed = sum(1 for r in receivers if r[4] == "completed")
    skipped = sum(1 for r in receivers if r[4] == "skipped")
    lines.append(f"skills: a non-empty SKILL.md from {written} of {len(ran)} completed attempts; handed on to "
                 f"{handed} of {len(receivers)} skill-conditioned attempts and chain hops ({skipped} skipped: "
                 "nothing to hand on)")

    # A store made before the claim tables (opened read-only) has none of them: query_claim_tables answers [] there.
    n_claims = _count(store, "SELECT COUNT(*) FROM claims")
    label, tax = stored_labels(store, annotator, taxonomy)
    if not n_claims or label is None:
        lines.append("claims: none stored yet (`mkb lineage RUN` cuts, annotates and links them)")
    else:
        closures = _count(store, "SELECT COUNT(*) FROM annotations WHERE annotator = ? AND taxonomy = ? AND "
                                 "category = 'unsupported_closure'", (label, tax))
        edges = _count(store, "SELECT COUNT(*) FROM lineage_edges")
        lines.append(f"claims: {n_claims} in the stored SKILL.md files, {closures} labelled unsupported_closure "
                     f"by {label} (read with its gold-set error: `mkb lineage` prints it); {edges} lineage "
                     f"edge{'' if edges == 1 else 's'}")
    lines.append(f"report: {index}" if index is not None else "report: not written (`mkb report RUN`)")
    return lines


def _count(store: RunStore, sql: str, params: tuple = ()) -> int:
    rows = query_claim_tables(store, sql, params)
    return int(rows[0][0]) if rows else 0
