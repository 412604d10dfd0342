"""One chain's lineage as a networkx DiGraph (nodes 'h<hop>:<claim id>' with text, category, modality, support;
edges with their type and similarity), and its GraphML export."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Protocol

import networkx as nx

from ..records.claims import LineageEdgeRecord


class _Node(Protocol):
    chain_id: str
    hop: int
    claim_id: str
    category: object
    modality: object
    support: object


def node_key(hop: int, claim_id: str) -> str:
    return f"h{hop}:{claim_id}"


def chain_graph(chain_id: str, nodes: Iterable[_Node], edges: Iterable[LineageEdgeRecord],
                texts: Mapping[str, str]) -> nx.DiGraph:
    graph = nx.DiGraph(chain_id=chain_id)
    for n in nodes:
        if n.chain_id == chain_id:
            graph.add_node(node_key(n.hop, n.claim_id), hop=n.hop, claim_id=n.claim_id,
                           text=texts.get(n.claim_id, ""), category=str(n.category or "unannotated"),
                           modality=str(n.modality or ""), support=str(n.support or ""))
    for e in edges:
        if e.chain_id == chain_id:
            graph.add_edge(node_key(e.hop - 1, e.parent_id), node_key(e.hop, e.child_id), edge=e.edge,
                           similarity=e.similarity)
    return graph


def write_graphml(graph: nx.DiGraph, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nx.write_graphml(graph, path)
    return path
