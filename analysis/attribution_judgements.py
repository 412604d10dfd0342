"""Where the attribution judge's answers are kept: one JSONL file per judge in the run directory,
`RUN/attribution/<judge>.jsonl` (`llm:glm-5.3:v1` → `llm-glm-5.3-v1.jsonl`), one `AttributionJudgement` a line,
sorted by cell-replicate.

The file is rewritten whole through `mkb_ray.store.export.atomic_write` (a temporary file renamed onto it), so a
reader — or a judge killed mid-run — never sees half a file; `mkb attribute` rewrites it every few seconds, so a
rerun skips what is already judged. A line that does not parse is skipped with a warning (and dropped at the next
write). The run store itself is never written.

`load_judgements(run_dir)` is what the report reads: every judge's records and their agreement with the rule pass
(`attribution_agreement`), as polars frames — empty, with their columns, when nothing was judged.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

import polars as pl
from pydantic import ValidationError

from ..store.export import atomic_write
from .attribution_agreement import CONFUSION_SCHEMA, SUMMARY_SCHEMA, agreement
from .attribution_judge import AttributionJudgement

log = logging.getLogger(__name__)

JUDGEMENTS_DIR = "attribution"
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
RECORD_SCHEMA = {"judge": pl.Utf8, "model": pl.Utf8, "target": pl.Utf8, "problem_id": pl.Utf8, "direction": pl.Utf8,
                 "replicate": pl.Int64, "status": pl.Utf8, "cause": pl.Utf8, "rule_cause": pl.Utf8,
                 "evidence": pl.Utf8, "reason": pl.Utf8, "replies": pl.Int64, "prompt_tokens": pl.Int64,
                 "completion_tokens": pl.Int64, "cost_usd": pl.Float64, "base_trial": pl.Utf8,
                 "skill_trial": pl.Utf8, "rule_labels": pl.Utf8, "prompt_sha256": pl.Utf8, "judged_at": pl.Utf8}


def judgements_path(run_dir: Path, judge: str) -> Path:
    """RUN/attribution/<judge, ':' and other unsafe characters as '-'>.jsonl."""
    return Path(run_dir) / JUDGEMENTS_DIR / f"{_UNSAFE.sub('-', judge)}.jsonl"


def read_judgements(path: Path) -> list[AttributionJudgement]:
    """The records of one judgements file ([] when there is none)."""
    if not path.is_file():
        return []
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(AttributionJudgement.model_validate_json(line))
        except ValidationError as error:
            log.warning("%s:%d: not a judgement, skipped (%s)", path, number, str(error).splitlines()[0])
    return out


def write_judgements(path: Path, records: Iterable[AttributionJudgement]) -> Path:
    """Write `records` (sorted by cell-replicate) as `path`, atomically."""
    ordered = sorted(records, key=lambda r: r.key)
    text = "".join(r.model_dump_json() + "\n" for r in ordered)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


@dataclass(frozen=True)
class JudgementTables:
    """`records`: every judgement (RECORD_SCHEMA, usage summed per record); `summary`: per judge, n_records and the
    agreement with the rule pass (SUMMARY_SCHEMA); `confusion`: per judge, rule cause × judge cause counts."""

    records: pl.DataFrame
    summary: pl.DataFrame
    confusion: pl.DataFrame

    @property
    def empty(self) -> bool:
        return self.records.is_empty()


def _row(r: AttributionJudgement) -> dict:
    priced = [u.cost_usd for u in r.usage if u.cost_usd is not None]
    return {"judge": r.judge, "model": r.model, "target": r.target, "problem_id": r.problem_id,
            "direction": r.direction, "replicate": r.replicate, "status": r.status, "cause": r.cause,
            "rule_cause": r.rule_cause, "evidence": r.evidence, "reason": r.reason, "replies": r.replies,
            "prompt_tokens": sum(u.prompt_tokens for u in r.usage),
            "completion_tokens": sum(u.completion_tokens for u in r.usage),
            "cost_usd": sum(priced) if priced else None, "base_trial": r.base_trial, "skill_trial": r.skill_trial,
            "rule_labels": r.rule_labels, "prompt_sha256": r.prompt_sha256, "judged_at": r.judged_at}


def judgement_tables(records: Iterable[AttributionJudgement]) -> JudgementTables:
    """The frames of `load_judgements` from records in memory (one or several judges)."""
    by_judge: dict[str, list[AttributionJudgement]] = {}
    for r in records:
        by_judge.setdefault(r.judge, []).append(r)
    rows, summaries, confusions = [], [], []
    for judge, group in sorted(by_judge.items()):
        group = sorted(group, key=lambda r: r.key)
        rows += [_row(r) for r in group]
        result = agreement([(r.rule_cause, r.cause) for r in group])
        summaries.append(result.summary.select(pl.lit(judge).alias("judge"), pl.lit(len(group)).cast(pl.Int64)
                                               .alias("n_records"), pl.all()))
        confusions.append(result.confusion.select(pl.lit(judge).alias("judge"), pl.all()))
    summary_schema = {"judge": pl.Utf8, "n_records": pl.Int64, **SUMMARY_SCHEMA}
    return JudgementTables(
        pl.DataFrame(rows, schema=RECORD_SCHEMA),
        pl.concat(summaries) if summaries else pl.DataFrame(schema=summary_schema),
        pl.concat(confusions) if confusions else pl.DataFrame(schema={"judge": pl.Utf8, **CONFUSION_SCHEMA}))


def load_judgements(run_dir: Path, judge: Optional[str] = None) -> JudgementTables:
    """Every judgement stored under RUN/attribution/ (only `judge`'s when given) with the agreement tables."""
    folder = Path(run_dir) / JUDGEMENTS_DIR
    paths = [judgements_path(run_dir, judge)] if judge else sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    return judgement_tables(r for path in paths for r in read_judgements(path))


def judgements_json(tables: JudgementTables) -> dict[str, list[dict]]:
    """The summary and confusion tables as lists of rows (for `mkb attribute --json`)."""
    return {"summary": tables.summary.to_dicts(), "confusion": tables.confusion.to_dicts()}
