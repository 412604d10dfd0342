"""Every trial of a run as the drill-down pages read it, loaded with a handful of batched queries (trial rows, all
submissions, all artifact names) instead of one query per trial, and each trial's page file name.

Artifact bytes (transcripts, kernels, SKILL.md) are read later, one page at a time, so memory holds one trial's
files at a time whatever the size of the run.
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Optional

from ...records import chain_id_of
from ...store import RunStore, SubmissionRow, TrialRow

TRIALS_DIR = "trials"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_STEM = 150


_SUBMISSION_SQL = f"SELECT {', '.join(SubmissionRow._fields)} FROM submissions ORDER BY trial_id, is_final, idx"
# The store's own row type (mkb_ray.store.SubmissionRow); its INTEGER 0/1 columns counted, compiled, correct
# (positions 3, 8, 9) read as bools here.
_BOOLS = (3, 8, 9)


@dataclass
class TrialIndex:
    """The run's trials (plan order) with their submissions, artifact names and page files.

    `page[trial_id]` is the page's file name inside trials/; `hop_trial[(chain_id, hop)]` the trial of a chain hop
    and `hop_of` the reverse.
    """

    rows: list[TrialRow]
    by_id: dict[str, TrialRow]
    page: dict[str, str]
    submissions: dict[str, list[SubmissionRow]]
    artifacts: dict[str, dict[str, str]]
    hop_trial: dict[tuple[str, int], str]
    hop_of: dict[str, tuple[str, int]]

    def href(self, trial_id: Optional[str], to_trials: str = "") -> Optional[str]:
        """The relative link to a trial's page; `to_trials` is the path from the linking page to trials/
        ('trials/' from the report root, '' from trials/ itself, '../trials/' from lists/)."""
        name = self.page.get(trial_id) if trial_id else None
        return None if name is None else f"{to_trials}{name}"


def file_stem(text: str, limit: int = _MAX_STEM) -> str:
    """A file-name stem of `text`: '/' becomes '__', anything else outside [A-Za-z0-9._-] '_', cut to `limit`."""
    return _UNSAFE.sub("_", text.replace("/", "__"))[:limit]


def page_names(trial_ids: list[str]) -> dict[str, str]:
    """A file name per trial id: '/' becomes '__', anything else outside [A-Za-z0-9._-] '_', cut to 150
    characters; a name already taken (two ids that differ only there) gets -2, -3... in plan order."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for tid in trial_ids:
        stem = file_stem(tid) or "trial"
        name, k = stem, 1
        while name.lower() in taken:
            k += 1
            name = f"{stem}-{k}"
        taken.add(name.lower())
        out[tid] = f"{name}.html"
    return out


def load_trials(store: RunStore) -> TrialIndex:
    """Trial rows, submissions and artifact names of the whole run: three queries."""
    rows = list(store.trial_rows())
    submissions: dict[str, list[SubmissionRow]] = defaultdict(list)
    for r in store.connection.execute(_SUBMISSION_SQL):
        values = list(r)
        for i in _BOOLS:
            if values[i] is not None:
                values[i] = bool(values[i])
        submissions[r[0]].append(SubmissionRow(*values))
    artifacts: dict[str, dict[str, str]] = defaultdict(dict)
    for tid, name, sha in store.connection.execute("SELECT trial_id, name, sha256 FROM artifacts"):
        artifacts[tid][name] = sha
    hop_trial = {(chain_id_of(r.model, r.problem_id, r.chain), r.hop): r.trial_id for r in rows
                 if r.kind == "chain_hop" and r.chain is not None and r.hop is not None}
    return TrialIndex(rows=rows, by_id={r.trial_id: r for r in rows}, page=page_names([r.trial_id for r in rows]),
                      submissions=dict(submissions), artifacts=dict(artifacts), hop_trial=hop_trial,
                      hop_of={tid: key for key, tid in hop_trial.items()})
