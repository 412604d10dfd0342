"""A run's claims and lineage as the propagation metrics take them: one `ClaimNode` per claim per chain hop, the
stored edges, and each hop's outcome next to its chain's solo baseline in the same DSL. Reads the store, never
writes it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..records import chain_id_of
from ..records.claims import LineageEdgeRecord
from ..records.intervention import chain_variant
from ..store import RunStore
from .cells import result_rows
from .chains import hop_outcomes
from .propagation import ClaimNode, HopOutcome


@dataclass(frozen=True)
class LineageData:
    nodes: list[ClaimNode]
    edges: list[LineageEdgeRecord]
    outcomes: list[HopOutcome]
    texts: dict[str, str]          # claim id -> text, for drill-down and GraphML
    # chain id -> its intervention token ('' for a plain chain; records/intervention.chain_variant)
    variants: dict[str, str] = field(default_factory=dict)

    def plain(self) -> "LineageData":
        """Only the plain chains: what the propagation headline describes (gated twins and containment probes are
        compared with them separately: analysis/gate_chains.py, analysis/containment.py)."""
        if not any(self.variants.values()):
            return self
        keep = {c for c, v in self.variants.items() if not v}
        return LineageData([n for n in self.nodes if n.chain_id in keep], [e for e in self.edges if e.chain_id in keep],
                           [o for o in self.outcomes if o.chain_id in keep], self.texts,
                           {c: v for c, v in self.variants.items() if c in keep})


def load_lineage(store: RunStore, matcher: str, annotator: str, taxonomy: str,
                 chain: Optional[str] = None) -> LineageData:
    """Everything of the run's chains (or one chain id) that `mkb lineage` stored under this matcher/annotator.
    Read chain by chain, so only one chain's claim records and annotations are in memory at a time."""
    rows = [r for r in store.trial_rows() if r.done]
    hops = [(chain_id_of(r.model, r.problem_id, r.chain), r.hop, r) for r in rows
            if r.kind == "chain_hop" and r.chain is not None and r.hop is not None]
    if chain is not None:
        hops = [h for h in hops if h[0] == chain]
    start_dsl = {c: r.dsl for c, k, r in hops if k == 0}
    variant = {c: chain_variant(r.arm_name) for c, k, r in hops if k == 0}
    by_chain: dict[str, list] = {}
    for chain_id, hop, row in sorted(hops, key=lambda h: (h[0], h[1])):
        by_chain.setdefault(chain_id, []).append((hop, row))
    nodes, texts = [], {}
    for chain_id, chain_hops in by_chain.items():
        by_skill = store.claims.claims_by_skill({r.skill_sha for _, r in chain_hops if r.skill_sha})
        notes = store.claims.annotations(annotator, taxonomy, [c.claim_id for cs in by_skill.values() for c in cs])
        for hop, row in chain_hops:
            for claim in by_skill.get(row.skill_sha or "", []):
                a = notes.get(claim.claim_id)
                annotated = a is not None and a.status == "annotated"
                nodes.append(ClaimNode(chain_id=chain_id, hop=hop, claim_id=claim.claim_id,
                                       category=a.category if annotated else None,
                                       modality=a.modality if annotated else None,
                                       support=a.support if annotated else None,
                                       model=row.model, start_dsl=start_dsl.get(chain_id, ""), dsl=row.dsl,
                                       variant=variant.get(chain_id, "")))
                texts.setdefault(claim.claim_id, claim.text)
    edges = [e for e in store.claims.lineage_edges(matcher=matcher) if chain is None or e.chain_id == chain]
    outcomes = [o for o in hop_outcomes(result_rows(store)) if chain is None or o.chain_id == chain]
    return LineageData(nodes, edges, outcomes, texts, variant)
