"""Lineage: which claim at hop k-1 each claim at hop k came from, and how (copied, paraphrased, strengthened,
weakened, contradicted, merged, split), or that it was born there.

    match.py        the matcher: exact copies, MiniLM similarity over a calibrated threshold, edge typing
    validation.py   stripped synthetic chains: transition rates recovered from text vs the generator's truth
"""
