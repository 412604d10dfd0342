"""Lineage: which claim at hop k-1 each claim at hop k came from, and how (copied, paraphrased, strengthened,
weakened, contradicted, merged, split), or that it was born there.

    match.py         the matcher: exact copies, MiniLM similarity over a calibrated threshold, edge typing
    pipeline.py      over a run store: segment, annotate and match every chain, store claims and edges
    graph.py         one chain's lineage as a networkx DiGraph, and its GraphML export
    fidelity.py      what `mkb lineage` wrote, scored against a synthetic run's true graph
    gold_scoring.py  the matcher scored on the hand-labelled gold chains (tests/gold/lineage)
"""
