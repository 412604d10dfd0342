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


def _category_error(scores: dict[str, Any], digits: Optional[int] = None) -> CategoryError:
    def rate(name: str) -> float:
        value = float(scores[name])
        return round(value, digits) if digits is not None else value

    return CategoryError(rate("precision"), rate("recall"), int(scores["gold"]), int(scores["true_positives"]),
                         int(scores["predicted"]))


def from_gold_report(annotator: str, report: dict[str, Any], scores: dict[str, Any]) -> AnnotatorError:
    """From `mkb gold`'s JSON report (its split and file count) and one annotator's entry of it."""
    return AnnotatorError(annotator, str(report["split"]), int(report["files"]), int(scores["n"]),
                          round(float(scores["category_accuracy"]), 4), round(float(scores["kappa_vs_gold"]), 4),
                          {c: _category_error(v, 4) for c, v in sorted(scores["per_category"].items())})


def _entries(path: Path) -> dict[str, Any]:
    """The record file's entries; none when there is no file yet. A file that is not a JSON object is an error
    naming it (never silently read as empty, or overwritten)."""
    try:
        entries = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not a readable annotator-error record ({err})") from err
    if not isinstance(entries, dict):
        raise ValueError(f"{path}: expected an object of annotator name -> scores")
    return entries


def recorded_error(annotator: str, path: Path = RECORDED) -> Optional[AnnotatorError]:
    """The recorded test-split scores of `annotator` (None: never recorded, or no record file)."""
    entry = _entries(path).get(annotator)
    if entry is None:
        return None
    try:
        return AnnotatorError(str(entry["annotator"]), str(entry["split"]), int(entry["files"]), int(entry["claims"]),
                              float(entry["category_accuracy"]), float(entry["kappa_vs_gold"]),
                              {str(c): _category_error(v) for c, v in entry["per_category"].items()})
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{path}: entry {annotator!r}: {type(err).__name__}: {err}") from err


def record_error(error: AnnotatorError, path: Path = RECORDED) -> None:
    """Store (or replace) one annotator's entry."""
    entries = _entries(path)
    entries[error.annotator] = error.as_json()
    path.write_text(json.dumps(dict(sorted(entries.items())), indent=1) + "\n")


__all__ = ["AnnotatorError", "CategoryError", "RECORDED", "from_gold_report", "record_error", "recorded_error"]
