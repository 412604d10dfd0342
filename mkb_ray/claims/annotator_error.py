"""An annotator's measured error on the hand-labelled test split, recorded where `mkb lineage` reads it.

`mkb lineage` reports prevalence, survival and reinforcement per category as the annotator labelled the claims;
how far to trust a row depends on how well that annotator finds that category in text it was never tuned on.
`mkb gold --split test --record` scores each annotator it is given on the gold test split (tests/gold/claims, files
written by hand and frozen) and stores the scores here under the annotator's name (e.g. `offline-v1`, which
changes whenever its rules do); `mkb lineage` prints them beside the headline. A stale record cannot hide: the
test suite re-scores the offline annotator and compares (tests/test_claims.py).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

RECORDED = Path(__file__).with_name("annotator_error.json")


@dataclass(frozen=True)
class CategoryError:
    precision: float
    recall: float
    gold: int  # gold claims of the category in the split
    true_positives: int  # of those, labelled with it
    predicted: int  # gold claims (of any category) the annotator labelled with it


@dataclass(frozen=True)
class AnnotatorError:
    annotator: str
    split: str
    files: int
    claims: int
    category_accuracy: float
    kappa_vs_gold: float
    per_category: dict[str, CategoryError]

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "per_category": {c: asdict(s) for c, s in self.per_category.items()}}


def from_gold_report(annotator: str, report: dict[str, Any], scores: dict[str, Any]) -> AnnotatorError:
    """From `mkb gold`'s JSON report (its split and file count) and one annotator's entry of it."""
    return AnnotatorError(annotator, str(report["split"]), int(report["files"]), int(scores["n"]),
                          round(float(scores["category_accuracy"]), 4), round(float(scores["kappa_vs_gold"]), 4),
                          {c: CategoryError(round(float(v["precision"]), 4), round(float(v["recall"]), 4),
                                            int(v["gold"]), int(v["true_positives"]), int(v["predicted"]))
                           for c, v in sorted(scores["per_category"].items())})


def recorded_error(annotator: str, path: Path = RECORDED) -> Optional[AnnotatorError]:
    """The recorded test-split scores of `annotator` (None: never recorded, or no record file)."""
    try:
        entry = json.loads(path.read_text()).get(annotator)
    except (OSError, json.JSONDecodeError, AttributeError):
        return None
    if not isinstance(entry, dict):
        return None
    try:
        return AnnotatorError(str(entry["annotator"]), str(entry["split"]), int(entry["files"]), int(entry["claims"]),
                              float(entry["category_accuracy"]), float(entry["kappa_vs_gold"]),
                              {str(c): CategoryError(float(v["precision"]), float(v["recall"]), int(v["gold"]),
                                                     int(v["true_positives"]), int(v["predicted"]))
                               for c, v in entry["per_category"].items()})
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{path}: entry {annotator!r}: {type(err).__name__}: {err}") from err


def record_error(error: AnnotatorError, path: Path = RECORDED) -> None:
    """Store (or replace) one annotator's entry."""
    try:
        entries = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        entries = {}
    entries[error.annotator] = error.as_json()
    path.write_text(json.dumps(dict(sorted(entries.items())), indent=1) + "\n")


__all__ = ["AnnotatorError", "CategoryError", "RECORDED", "from_gold_report", "record_error", "recorded_error"]
