"""`mkb gold`: score the claim pipeline against the hand-labelled gold sets — segmentation, each annotator's
category/modality/support (accuracy, per-category precision/recall, Cohen's κ with the gold labels and between
annotators) and the lineage matcher's edge precision/recall. Exit codes: 0 scored, 2 bad arguments or gold files.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HELP = "score segmentation, annotators and the lineage matcher against the hand-labelled gold sets"
DESCRIPTION = """Score the claim pipeline against the gold sets written by hand (tests/gold/claims: SKILL.md files
with every claim labelled; tests/gold/lineage: chains with every edge labelled). The offline annotator's rules were
built looking at the dev split only: report the test split (the default).

examples:
  mkb gold                                                 # offline annotator, test split, matcher too
  mkb gold --annotator offline --annotator smollm2 --api-base http://127.0.0.1:8000/v1
  mkb gold --split all --json

What `mkb lineage` recovers of a synthetic chain's truth (its shipped files, nothing regrouped) is measured by
benchmarks/lineage_fidelity.py.
"""
DEFAULT_GOLD = Path(__file__).resolve().parents[2] / "tests" / "gold"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--annotator", action="append", metavar="offline|learned|MODEL",
                        help="an annotator to score (repeat for several; κ between them is printed); "
                             "default: offline")
    parser.add_argument("--api-base", metavar="URL", help="the endpoint of the LLM annotator's model")
    parser.add_argument("--split", choices=["test", "dev", "all"], default="test")
    parser.add_argument("--gold", type=Path, default=DEFAULT_GOLD, metavar="DIR",
                        help="the gold directory (holds claims/ and lineage/; default: the repository's tests/gold)")
    parser.add_argument("--taxonomy", default="mkb-11", metavar="NAME|PATH")
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")
    parser.add_argument("--record", action="store_true",
                        help="store each annotator's test-split scores where `mkb lineage` prints them beside its "
                             "headline (mkb_ray/claims/annotator_error.json; needs --split test)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..claims.gold import GoldFileError, load_gold_skills
    from ..claims.scoring import align, cohens_kappa, paired, score_labels
    from ..claims.segment import segment
    from ..claims.taxonomy import TaxonomyError, load_taxonomy

    try:
        taxonomy = load_taxonomy(args.taxonomy)
        gold = load_gold_skills(args.gold / "claims", None if args.split == "all" else args.split)
    except (TaxonomyError, GoldFileError) as error:
        print(f"mkb gold: {error}", file=sys.stderr)
        return 2
    if not gold:
        print(f"mkb gold: no gold claims files under {args.gold / 'claims'} for split {args.split}", file=sys.stderr)
        return 2
    if args.record and args.split != "test":
        print("mkb gold: --record stores test-split scores only (the split the rules were never tuned on)",
              file=sys.stderr)
        return 2
    names = args.annotator or ["offline"]
    from ..claims.annotators import make_annotator
    from ..claims.learned import LearnedWeightsError

    try:
        annotators = [make_annotator(name, taxonomy, args.api_base) for name in names]
    except LearnedWeightsError as error:
        print(f"mkb gold: {error}", file=sys.stderr)
        return 2
    per_annotator: dict[str, list] = {name: [] for name in names}
    seg = {"gold": 0, "predicted": 0, "found": 0, "matched": 0}
    for _, skill in gold:
        predicted = segment(skill.skill)
        aligned, score = align(skill, predicted)
        for key in seg:
            seg[key] += getattr(score, key)
        for name, annotator in zip(names, annotators):
            per_annotator[name] += paired(aligned, annotator.annotate(predicted, skill.evidence))
    report: dict = {"split": args.split, "files": len(gold), "segmentation": {
        **seg, "recall": seg["found"] / seg["gold"], "precision": seg["matched"] / max(1, seg["predicted"])}}
    report["annotators"] = {}
    for name, pairs in per_annotator.items():
        s = score_labels(pairs)
        kappa = cohens_kappa([a.gold_category for a, _ in pairs], [x.category if x else None for _, x in pairs])
        report["annotators"][name] = {"n": s.n, "category_accuracy": s.category_accuracy, "kappa_vs_gold": kappa,
                                      "modality_accuracy": s.modality_accuracy,
                                      "support_accuracy": s.support_accuracy, "unannotated": s.unannotated,
                                      "per_category": {c: {"precision": p, "recall": r, "gold": n,
                                                           "true_positives": s.counts[c][0],
                                                           "predicted": s.counts[c][1]}
                                                       for c, (p, r, n) in s.per_category.items()}}
    if len(names) > 1:
        report["kappa_between"] = {
            f"{a} vs {b}": cohens_kappa([x.category if x else None for _, x in per_annotator[a]],
                                        [x.category if x else None for _, x in per_annotator[b]])
            for i, a in enumerate(names) for b in names[i + 1:]}
    report["matcher"] = _matcher(args.gold / "lineage", annotators)
    if args.record:
        from ..claims.annotator_error import RECORDED, from_gold_report, record_error

        try:
            for name, annotator in zip(names, annotators):
                record_error(from_gold_report(annotator.name, report, report["annotators"][name]))
        except ValueError as error:  # the record file exists but is not a record: named, never overwritten
            print(f"mkb gold: --record: {error}", file=sys.stderr)
            return 2
        print(f"recorded the test-split scores of {', '.join(a.name for a in annotators)} in {RECORDED}",
              file=sys.stderr)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print(report)
    return 0


def _matcher(directory: Path, annotators: list) -> dict:
    from ..lineage.gold_scoring import score_matcher

    if not any(directory.glob("*.yaml")):
        return {}
    encoder = next((a.encoder for a in annotators if hasattr(a, "encoder")), None)
    score = score_matcher(directory, encoder)
    return {"gold_edges": score.gold_edges, "predicted_edges": score.predicted_edges, "true_edges": score.true_edges,
            "precision": score.precision, "recall": score.recall, "type_accuracy": score.type_accuracy}


def _print(report: dict) -> None:
    from rich.table import Table

    from ._console import make_console

    console = make_console()
    s = report["segmentation"]
    console.print(f"gold {report['split']} split, {report['files']} SKILL.md files, {s['gold']} gold claims: "
                  f"segmentation recall {s['recall']:.3f}, precision {s['precision']:.3f} "
                  f"({s['predicted']} predicted)")
    for name, a in report["annotators"].items():
        table = Table(title=f"{name}: category accuracy {a['category_accuracy']:.3f} (κ vs gold "
                            f"{a['kappa_vs_gold']:.3f}), modality {a['modality_accuracy']:.3f}, support "
                            f"{a['support_accuracy']:.3f}, unannotated {a['unannotated']} of {a['n']}")
        for column in ("category", "precision", "recall", "gold claims"):
            table.add_column(column, justify="left" if column == "category" else "right")
        for category, v in a["per_category"].items():
            table.add_row(category, f"{v['precision']:.2f}", f"{v['recall']:.2f}", str(v["gold"]))
        console.print(table)
    for pair, kappa in report.get("kappa_between", {}).items():
        console.print(f"κ between annotators, {pair}: {kappa:.3f}")
    m = report["matcher"]
    if m:
        console.print(f"lineage matcher on the gold chains: {m['gold_edges']} gold edges, {m['predicted_edges']} "
                      f"predicted; precision {m['precision']:.3f}, recall {m['recall']:.3f}, edge-type accuracy "
                      f"{m['type_accuracy']:.3f} (on the edges found)")
