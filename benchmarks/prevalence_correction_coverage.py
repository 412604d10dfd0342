"""How often does the corrected prevalence's 95 % interval cover the truth? (analysis/annotator_correction.py)

Simulated worlds with known truth: chains of SKILL.md claims, each truly of category C with probability `--truth`,
labelled by an annotator that finds C with probability `--recall` and calls other claims C with probability `--fp`;
the annotator's recorded error comes from a simulated gold set of `--gold` claims labelled by the same annotator.
Prints, over `--worlds` worlds, the share whose 95 % interval covers the truth — corrected and as labelled — and
the mean corrected value. Nothing is asserted (tests/test_annotator_correction.py checks three worlds).

    python3 benchmarks/prevalence_correction_coverage.py                 # ~3 s
    python3 benchmarks/prevalence_correction_coverage.py --recall 0.21 --fp 0.024 --gold 273 --truth 0.1
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mkb_ray.analysis.annotator_correction import corrected_prevalence  # noqa: E402
from mkb_ray.analysis.propagation import ClaimNode  # noqa: E402
from mkb_ray.claims.annotator_error import AnnotatorError, CategoryError  # noqa: E402

C = "unsupported_closure"


def simulated_world(seed: int, truth: float, recall: float, fp: float, gold_claims: int = 300, chains: int = 40,
                    hops: int = 10, claims: int = 30) -> tuple[list[ClaimNode], AnnotatorError]:
    """The labelled claims of `chains` chains and the annotator's error measured on a simulated gold set."""
    rng = np.random.default_rng(seed)

    def label(true_c: np.ndarray) -> np.ndarray:
        return np.where(true_c, rng.random(true_c.size) < recall, rng.random(true_c.size) < fp)

    nodes = []
    for chain in range(chains):
        for hop in range(hops):
            labels = label(rng.random(claims) < truth)
            nodes += [ClaimNode(f"c{chain}", hop, f"c{chain}h{hop}n{i}", C if x else "other", "plain", "unsupported")
                      for i, x in enumerate(labels)]
    gold_c = rng.random(gold_claims) < truth
    said_c = label(gold_c)
    tp, predicted, gold = int((gold_c & said_c).sum()), int(said_c.sum()), max(int(gold_c.sum()), 1)
    error = AnnotatorError("simulated", "test", 10, gold_claims, 0.0, 0.0,
                           {C: CategoryError(tp / max(predicted, 1), tp / gold, gold, tp, predicted)})
    return nodes, error


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", type=int, default=60)
    parser.add_argument("--truth", type=float, default=0.30)
    parser.add_argument("--recall", type=float, default=0.6)
    parser.add_argument("--fp", type=float, default=0.10)
    parser.add_argument("--gold", type=int, default=300, help="claims in the simulated gold set")
    args = parser.parse_args()
    covered = {"corrected": 0, "raw": 0}
    unbounded = 0
    values = []
    for seed in range(100, 100 + args.worlds):
        nodes, error = simulated_world(seed, args.truth, args.recall, args.fp, args.gold)
        row = corrected_prevalence(nodes, error, [C], n_boot=1000, seed=seed).row(0, named=True)
        covered["raw"] += row["raw_lo"] <= args.truth <= row["raw_hi"]
        if row["corrected_lo"] is not None:
            covered["corrected"] += row["corrected_lo"] <= args.truth <= row["corrected_hi"]
            unbounded += (row["corrected_lo"], row["corrected_hi"]) == (0.0, 1.0)
        if row["corrected"] is not None:
            values.append(row["corrected"])
    print(f"{args.worlds} simulated worlds: true share {args.truth}, recall {args.recall}, false-positive rate "
          f"{args.fp}, a {args.gold}-claim gold set; 40 chains x 10 hops x 30 claims")
    print(f"95 % interval covers the truth: corrected {covered['corrected']}/{args.worlds} "
          f"({unbounded} of them [0, 1]), as labelled {covered['raw']}/{args.worlds}; mean corrected value "
          f"{np.mean(values) if values else float('nan'):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
