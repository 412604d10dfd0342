"""The containment probe (issue 29): chains seeded with a planted false closure — is it gone within k hops, with and
without the verification gate? The figure to set beside "From Spark to Fire" (arXiv 2603.04474), whose lineage
governance layer contained an injected error in 0.89 of runs (0.32 without it).

A probe chain (records/intervention.py: arm name `chain<c>~probe` or `~probe-gate-<mode>`) is the twin of plain chain
c whose hop 1 read hop 0's SKILL.md with the planted claim added. Presence: a SKILL.md holds the claim when one of its
claims (`claims.segment`) is at least PRESENT_SIMILARITY cosine-similar to the planted text (MiniLM, as the lineage
matcher measures; the matcher's one-sided threshold: a paraphrase counts, a different closure does not). Contained
within k: hop k's SKILL.md does not hold it (k = the probe's `within`, or the chain's last hop when shorter).
Per probe arm: the share of chains contained, with an interval resampling problems, and the share holding it at each
hop. For a synthetic run also the truth — whether hop k holds a descendant of the planted claim by the ground-truth
comments (`synthetic.plant.descendants_by_hop`) — and how often the detector agrees with it, hop by hop.
"""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np
import polars as pl

from ..records import chain_id_of
from ..records.intervention import parse_arm, probe_token
from ..store import RunStore
from .bootstrap import Bootstrap
from .chains import problem_of_chain

# The lineage matcher's one-sided threshold (mkb_ray/lineage/match.py DEFAULT_ONE_SIDED_THRESHOLD): a child takes a
# parent it is this similar to even with no other evidence.
PRESENT_SIMILARITY = 0.60
CONTAINMENT_COLUMNS = ("probe", "chains", "within", "contained", "contained_lo", "contained_hi", "present_by_hop",
                       "true_contained", "detector_agreement")


@dataclass(frozen=True)
class ProbeChain:
    chain_id: str
    label: str                     # the probe arm's label ("probe, no gate", "probe, gate (remove)")
    token: str
    skills: list[str]              # the SKILL.md of hops 1, 2, ... that ran (stops at the first hop not done)


def probe_chains(store: RunStore) -> list[ProbeChain]:
    """Every probe chain of the run with the SKILL.md files its hops >= 1 wrote, in hop order."""
    hops: dict[str, dict[int, Any]] = defaultdict(dict)
    refs = {}
    for row in store.trial_rows():
        if row.kind != "chain_hop" or row.chain is None or row.hop is None:
            continue
        ref = parse_arm(row.arm_name)
        if ref is None or ref.kind != "containment_probe":
            continue
        cid = chain_id_of(row.model, row.problem_id, row.chain)
        refs[cid] = ref
        hops[cid][row.hop] = row
    out = []
    for cid, by_hop in sorted(hops.items()):
        skills = []
        for hop in range(1, max(by_hop) + 1):
            row = by_hop.get(hop)
            if row is None or not row.done:
                break
            skills.append(store.skill_text(row.trial_id) or "")
        out.append(ProbeChain(cid, refs[cid].label, refs[cid].token, skills))
    return out


def probe_settings(meta: dict[str, Any]) -> dict[str, tuple[str, int]]:
    """token -> (planted claim, within) of the run's containment probes, from its stored config."""
    config = json.loads(meta.get("config_json") or "{}")
    out = {}
    for spec in config.get("interventions") or []:
        if spec.get("kind") == "containment_probe":
            for gate in spec.get("gates") or ["none", "remove"]:
                token = probe_token(None if gate == "none" else gate, spec.get("name", ""))
                out[token] = (spec.get("claim", ""), int(spec.get("within", 3)))
    return out


def presence(skills: Sequence[str], planted: str, encoder: Any) -> list[bool]:
    """Whether each SKILL.md holds the planted claim (a claim at least PRESENT_SIMILARITY similar to it)."""
    from ..claims.segment import segment

    target = encoder.encode([planted])[0]
    out = []
    for text in skills:
        claims = [c.text for c in segment(text)] if text.strip() else []
        sims = encoder.encode(claims) @ target if claims else np.zeros(0)
        out.append(bool(claims) and float(sims.max()) >= PRESENT_SIMILARITY)
    return out


def containment_table(chains: Sequence[ProbeChain], settings: dict[str, tuple[str, int]], encoder: Any,
                      synthetic: bool = False, boot: Bootstrap = Bootstrap()) -> pl.DataFrame:
    """One row per probe arm: chains (with hop `within` done), within, contained share [interval], the share holding
    the claim at each hop 1.. (present_by_hop), and for a synthetic run the true contained share and the detector's
    agreement with the truth over every (chain, hop)."""
    groups: dict[str, list[tuple[str, list[bool], Optional[list[bool]], int]]] = defaultdict(list)
    for chain in chains:
        planted, within = settings.get(chain.token, ("", 3))
        if not chain.skills or not planted:
            continue
        if synthetic:
            # A synthetic run plants the generator's closure whatever the config's words (campaign/handoff.py).
            from ..synthetic.plant import descendants_by_hop, planted_closure

            planted = planted_closure().text
        found = presence(chain.skills, planted, encoder)
        truth = descendants_by_hop(chain.skills) if synthetic else None
        groups[chain.label].append((chain.chain_id, found, truth, within))
    rows = []
    rng = boot.rng()
    for label, members in sorted(groups.items()):
        k = min(members[0][3], min(len(f) for _, f, _, _ in members))
        per_problem: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(2))
        for cid, found, _, _ in members:
            per_problem[problem_of_chain(cid)] += (not found[k - 1], 1)
        sums = np.array(list(per_problem.values()))
        lo, hi = boot.of(sums, lambda s: s[:, 0] / s[:, 1], rng)
        depth = max(len(f) for _, f, _, _ in members)
        present = [float(np.mean([f[h] for _, f, _, _ in members if len(f) > h])) for h in range(depth)]
        row = {"probe": label, "chains": len(members), "within": k,
               "contained": float(sums[:, 0].sum() / sums[:, 1].sum()), "contained_lo": lo, "contained_hi": hi,
               "present_by_hop": present, "true_contained": None, "detector_agreement": None}
        if synthetic:
            row["true_contained"] = float(np.mean([not t[k - 1] for _, _, t, _ in members if t]))
            pairs = [(a, b) for _, f, t, _ in members if t for a, b in zip(f, t)]
            row["detector_agreement"] = float(np.mean([a == b for a, b in pairs])) if pairs else None
        rows.append(row)
    schema = {"probe": pl.Utf8, "chains": pl.Int64, "within": pl.Int64, "contained": pl.Float64,
              "contained_lo": pl.Float64, "contained_hi": pl.Float64, "present_by_hop": pl.List(pl.Float64),
              "true_contained": pl.Float64, "detector_agreement": pl.Float64}
    return pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(schema=schema)
