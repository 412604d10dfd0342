"""Fit the learned offline annotator (mkb_ray/claims/learned.py) to the hand-labelled dev split, and write its weights.

Training data: every labelled claim (its quote and gold category) of the gold claims files whose `split` is `dev`,
plus the taxonomy's own definitions and examples. The test split is never read.

    python3 scripts/fit_learned_annotator.py --cv          # leave-one-file-out over the dev files, a small grid
    python3 scripts/fit_learned_annotator.py --l2 1e-3 --class-weight-power 0.5   # fit and write the weights

`--cv` prints, per setting, the category accuracy and the closure category's precision and recall of the files left
out in turn (each file scored by a model fitted to the other dev files); pick a setting from that table, never from
the test split. Without `--cv` the weights are written to mkb_ray/claims/learned_annotator.json (or --out), with the
files they came from; tests/test_learned_annotator.py re-derives them.
"""
from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mkb_ray.claims.embeddings import shared_encoder  # noqa: E402
from mkb_ray.claims.gold import load_gold_skills  # noqa: E402
from mkb_ray.claims.learned import (WEIGHTS, FitSettings, LearnedWeights, decide, features, fit,  # noqa: E402
                                    softmax)
from mkb_ray.claims.support import judge_support  # noqa: E402
from mkb_ray.claims.taxonomy import Taxonomy, load_taxonomy  # noqa: E402

GOLD = REPO / "tests" / "gold" / "claims"


def training_set(gold: Path, taxonomy: Taxonomy) -> tuple[list[str], list[int], list[str], list[Optional[str]]]:
    """(texts, class indexes, source per text, judged support per text): dev claims first, then the taxonomy's
    definitions and examples (support unknown)."""
    index = {name: i for i, name in enumerate(taxonomy.names)}
    texts, labels, sources = [], [], []
    supports: list[Optional[str]] = []
    for path, skill in load_gold_skills(gold, "dev"):
        for claim in skill.claims:
            if claim.category not in index:
                raise SystemExit(f"{path}: claims: category {claim.category!r} is not in {taxonomy.ref}")
            texts.append(claim.quote)
            labels.append(index[claim.category])
            sources.append(path.name)
            # What the annotator will see at run time: the support the verdicts give, not the gold label's.
            supports.append(judge_support(claim.quote, skill.evidence).support)
    for category in taxonomy.categories:
        for text in (category.definition, *category.examples):
            texts.append(text)
            labels.append(index[category.name])
            sources.append(f"taxonomy:{taxonomy.ref}")
            supports.append(None)
    return texts, labels, sources, supports


def fitted(gold: Path, taxonomy: Taxonomy, settings: FitSettings) -> LearnedWeights:
    texts, labels, sources, supports = training_set(gold, taxonomy)
    weights = fit(features(texts, shared_encoder(), supports), labels, len(taxonomy.names), settings)
    files = sorted({s for s in sources if not s.startswith("taxonomy:")})
    return LearnedWeights(taxonomy.ref, taxonomy.names, weights, tuple(files), settings)


def cross_validate(gold: Path, taxonomy: Taxonomy, grid: list[FitSettings], thresholds: list[float]) -> None:
    texts, labels, sources, supports = training_set(gold, taxonomy)
    x = features(texts, shared_encoder(), supports)
    y = np.array(labels)
    closure = taxonomy.names.index(taxonomy.closure_category)
    files = sorted({s for s in sources if not s.startswith("taxonomy:")})
    print(f"leave-one-file-out over {len(files)} dev files, {sum(not s.startswith('taxonomy:') for s in sources)} "
          f"claims (+{sum(s.startswith('taxonomy:') for s in sources)} taxonomy texts always in training)")
    print(f"{'l2':>8} {'power':>6} {'steps':>6} {'closure_t':>9}  accuracy  closure P  closure R")
    for settings in grid:
        probabilities = np.zeros((len(texts), len(taxonomy.names)))
        for held in files:
            out = np.array([s == held for s in sources])
            weights = fit(x[~out], y[~out].tolist(), len(taxonomy.names), settings)
            probabilities[out] = softmax(x[out] @ weights.T)
        scored = np.array([not s.startswith("taxonomy:") for s in sources])
        for threshold in thresholds:
            chosen = replace(settings, closure_threshold=threshold)
            predicted = np.array([index for index, _ in decide(probabilities, closure, chosen)])
            accuracy = float((predicted[scored] == y[scored]).mean())
            said = (predicted == closure) & scored
            true = (y == closure) & scored
            precision = float((said & true).sum() / max(said.sum(), 1))
            recall = float((said & true).sum() / max(true.sum(), 1))
            print(f"{settings.l2:>8g} {settings.class_weight_power:>6g} {settings.steps:>6} {threshold:>9g}  "
                  f"{accuracy:8.3f}  {precision:9.3f}  {recall:9.3f}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gold", type=Path, default=GOLD, help="the gold claims directory (its dev split is read)")
    parser.add_argument("--taxonomy", default="mkb-11")
    parser.add_argument("--cv", action="store_true", help="leave-one-file-out cross-validation over a small grid")
    parser.add_argument("--l2", type=float, default=FitSettings.l2)
    parser.add_argument("--class-weight-power", type=float, default=FitSettings.class_weight_power)
    parser.add_argument("--steps", type=int, default=FitSettings.steps)
    parser.add_argument("--closure-threshold", type=float, default=FitSettings.closure_threshold)
    parser.add_argument("--out", type=Path, default=WEIGHTS)
    args = parser.parse_args()
    taxonomy = load_taxonomy(args.taxonomy)
    if args.cv:
        grid = [FitSettings(l2=l2, class_weight_power=power, steps=args.steps)
                for l2, power in itertools.product((1e-4, 1e-3), (0.5,))]
        cross_validate(args.gold, taxonomy, grid, [0.0, 0.2, 0.25, 0.3, 0.35, 0.4])
        return 0
    settings = FitSettings(l2=args.l2, class_weight_power=args.class_weight_power, steps=args.steps,
                           closure_threshold=args.closure_threshold)
    result = fitted(args.gold, taxonomy, settings)
    import json

    args.out.write_text(json.dumps(result.as_json()) + "\n")
    print(f"wrote {args.out}: {len(result.classes)} classes x {result.weights.shape[1]} features, fitted to "
          f"{len(result.trained_on)} dev files ({settings})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
