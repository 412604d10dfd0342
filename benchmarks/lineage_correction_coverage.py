"""Do the corrected survival and reinforced share of a category's lineages cover the truth? (issue 26, step 4)

SIMULATED worlds, no text: chains of claims where each claim is carried to the next hop with a probability that
depends on its TRUE category (closures `--keep-closure`, the rest `--keep-other`), new claims are born each hop
(a share `--prevalence` of them closures), and an annotator labels every claim closure with probability
`--recall` if it is one and `--fp` if not. Its error is measured on a simulated gold set of `--gold` claims, as
`mkb gold --record` would. The truth is the Kaplan–Meier survival (and reinforced share) of the lineages of true
closures; the raw value is the same computed over lineages the annotator labelled closure; the corrected one is
analysis/lineage_correction.py's. Prints, per metric, how often each 95 % interval covers the truth.

    python3 benchmarks/lineage_correction_coverage.py               # 40 worlds, ~2 min on 2 cores
    python3 benchmarks/lineage_correction_coverage.py --worlds 10 --keep-closure 0.8
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mkb_ray.analysis.lineage_correction import SURVIVAL_AT, corrected_lineage_metrics  # noqa: E402
from mkb_ray.analysis.propagation import ClaimNode, reinforcement, survival  # noqa: E402
from mkb_ray.claims.annotator_error import AnnotatorError, CategoryError  # noqa: E402
from mkb_ray.records.claims import LineageEdgeRecord  # noqa: E402

C = "unsupported_closure"


def simulated_world(seed: int, prevalence: float = 0.15, keep_closure: float = 0.92, keep_other: float = 0.75,
                    recall: float = 0.6, fp: float = 0.08, chains: int = 40, hops: int = 20, start: int = 30,
                    new: int = 4, gold: int = 300
                    ) -> tuple[list[ClaimNode], list[ClaimNode], list[LineageEdgeRecord], AnnotatorError]:
    """(labelled nodes, true nodes, edges, the annotator's error on the simulated gold set) of one world."""
    rng = np.random.default_rng(seed)
    labelled, truth, edges = [], [], []
    for chain in range(chains):
        chain_id, alive, k = f"c{chain}", [], 0
        for hop in range(hops):
            kept = []
            for parent, is_closure in alive:
                if rng.random() < (keep_closure if is_closure else keep_other):
                    child, k = f"{chain_id}n{k}", k + 1
                    edges.append(LineageEdgeRecord(chain_id=chain_id, hop=hop, parent_id=parent, child_id=child,
                                                   edge="copied", similarity=1.0, matcher="simulated"))
                    kept.append((child, is_closure))
            for _ in range(start if hop == 0 else new):
                kept.append((f"{chain_id}n{k}", bool(rng.random() < prevalence)))
                k += 1
            for claim, is_closure in kept:
                said = rng.random() < (recall if is_closure else fp)
                labelled.append(ClaimNode(chain_id, hop, claim, C if said else "other", "plain", "unsupported"))
                truth.append(ClaimNode(chain_id, hop, claim, C if is_closure else "other", "plain", "unsupported"))
            alive = kept
    gold_c = rng.random(gold) < prevalence
    said_c = np.where(gold_c, rng.random(gold) < recall, rng.random(gold) < fp)
    tp, predicted, n_c = int((gold_c & said_c).sum()), int(said_c.sum()), max(int(gold_c.sum()), 1)
    error = AnnotatorError("simulated", "test", 10, gold, 0.0, 0.0,
                           {C: CategoryError(tp / max(predicted, 1), tp / n_c, n_c, tp, predicted)})
    return labelled, truth, edges, error


def true_metrics(truth: list[ClaimNode], edges: list[LineageEdgeRecord]) -> dict[str, float]:
    curve = survival(truth, edges, C, n_boot=0)
    at = dict(zip(curve["t"].to_list(), curve["survival"].to_list()))
    out = {f"survival_t{t}": at[t] for t in SURVIVAL_AT}
    out["reinforced"] = float(reinforcement(truth, edges, [C], n_boot=0).totals["share_reinforced"][0])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", type=int, default=40)
    parser.add_argument("--prevalence", type=float, default=0.15, help="share of new claims that are closures")
    parser.add_argument("--keep-closure", type=float, default=0.92, help="per-hop carry probability of a closure")
    parser.add_argument("--keep-other", type=float, default=0.75, help="per-hop carry probability of the rest")
    parser.add_argument("--recall", type=float, default=0.6)
    parser.add_argument("--fp", type=float, default=0.08)
    parser.add_argument("--gold", type=int, default=300, help="claims in the simulated gold set")
    args = parser.parse_args()
    covered: dict[str, dict[str, int]] = {}
    for seed in range(100, 100 + args.worlds):
        labelled, truth, edges, error = simulated_world(seed, args.prevalence, args.keep_closure, args.keep_other,
                                                        args.recall, args.fp, gold=args.gold)
        true = true_metrics(truth, edges)
        table = corrected_lineage_metrics(labelled, edges, error, C, n_boot=500, seed=seed)
        for row in table.iter_rows(named=True):
            counts = covered.setdefault(row["metric"], {"raw": 0, "corrected": 0, "no value": 0})
            value = true[row["metric"]]
            counts["raw"] += row["raw_lo"] <= value <= row["raw_hi"]
            if row["corrected_lo"] is None:
                counts["no value"] += 1
            else:
                counts["corrected"] += row["corrected_lo"] <= value <= row["corrected_hi"]
    print(f"SIMULATED: {args.worlds} worlds, closure prevalence {args.prevalence} among births, carried per hop "
          f"{args.keep_closure} (closures) vs {args.keep_other} (rest), annotator recall {args.recall}, "
          f"false-positive rate {args.fp}, gold set {args.gold} claims")
    print(f"{'metric':14} {'raw covers':>11} {'corrected covers':>17} {'no value':>9}")
    for metric, counts in covered.items():
        print(f"{metric:14} {counts['raw']:>7}/{args.worlds} {counts['corrected']:>13}/{args.worlds} "
              f"{counts['no value']:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
