"""How well the lineage metrics computed from stripped synthetic chains recover the generator's truth
(`mkb gold --synthetic N` prints it).

`recovery_table` draws `chains` synthetic chains (seeds first_seed.., `validation.synthetic_chain`) and computes
a category's metrics three ways: on the generator's own graph (`truth`, read from the comments), on the pipeline's
graph of the stripped texts regrouped per generator sentence (`recovered`: offline annotator and matcher), and on
that graph with the generator's categories (`matcher only`: what the matcher alone does to a metric): one
row per metric with the three values and the recovered-minus-truth gap in points. The test suite checks 20 chains
(tests/test_lineage.py); `mkb gold --synthetic N` gives any larger sample a number in a paper needs.
"""
from __future__ import annotations

from typing import Optional, Sequence

import polars as pl

from ..analysis.propagation import ClaimNode, prevalence, reinforcement, survival
from ..claims.offline import OfflineAnnotator
from ..claims.taxonomy import load_taxonomy
from ..records.claims import LineageEdgeRecord
from ..synthetic import SyntheticSpec
from .validation import recovered_graph, synthetic_chain, truth_graph

SURVIVAL_TS = (1, 2, 5, 10, 20)
Graph = tuple[list[ClaimNode], list[LineageEdgeRecord]]


def closure_metrics(nodes: Sequence[ClaimNode], edges: Sequence[LineageEdgeRecord], category: str) -> dict[str, float]:
    """The headline numbers of one category: lineages born, survival at SURVIVAL_TS, mean prevalence over hops,
    reinforced and diluted shares (pooled over hop pairs)."""
    curve = survival(nodes, edges, category, n_boot=0)
    at = dict(zip(curve["t"].to_list(), curve["survival"].to_list()))
    out: dict[str, float] = {"lineages": float(curve["n_lineages"][0]) if not curve.is_empty() else 0.0}
    for t in SURVIVAL_TS:
        if t in at:
            out[f"survival_t{t}"] = at[t]
    shares = prevalence(nodes, [category], n_boot=0).filter(pl.col("category") == category)["share"]
    out["prevalence_mean"] = float(shares.mean() or 0.0)
    totals = reinforcement(nodes, edges, [category], n_boot=0).totals
    if not totals.is_empty():
        out["reinforced"] = float(totals["share_reinforced"][0])
        out["diluted"] = float(totals["share_diluted"][0])
    return out


def recovery_table(chains: int, hops: int, first_seed: int, category: str,
                   annotator: Optional[OfflineAnnotator] = None) -> pl.DataFrame:
    """metric | truth | recovered | matcher_only | gap_points (recovered - truth, in points; lineages: count)."""
    annotator = annotator or OfflineAnnotator(load_taxonomy("mkb-11"))
    graphs: dict[str, Graph] = {"truth": ([], []), "recovered": ([], []), "matcher_only": ([], [])}
    for seed in range(first_seed, first_seed + chains):
        texts = synthetic_chain(SyntheticSpec(), hops, seed=seed)
        chain_id = f"synthetic/chain{seed}"
        for name, (nodes, edges) in (("truth", truth_graph(texts, chain_id)),
                                     ("recovered", recovered_graph(texts, chain_id, annotator)),
                                     ("matcher_only", recovered_graph(texts, chain_id, annotator,
                                                                      truth_categories=True))):
            graphs[name][0].extend(nodes)
            graphs[name][1].extend(edges)
    values = {name: closure_metrics(n, e, category) for name, (n, e) in graphs.items()}
    rows = []
    for metric in values["truth"]:
        truth, got = values["truth"][metric], values["recovered"].get(metric)
        scale = 1.0 if metric == "lineages" else 100.0
        rows.append({"metric": metric, "truth": truth, "recovered": got,
                     "matcher_only": values["matcher_only"].get(metric),
                     "gap_points": None if got is None else (got - truth) * scale})
    return pl.DataFrame(rows)
