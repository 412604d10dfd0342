"""What every drill-down page reads — the run's trials, its claims, the category colours, the artifact files — and
how a page reads one artifact: cut past MAX_SHOWN_BYTES, and a missing file said so on the page, never an error.

Data loaded once (`TrialIndex`, `ClaimData`) is shared by every page; the only per-page reads are the page's own
artifact files.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple, Optional

from ...store import ArtifactMissing, ArtifactStore
from ..pairs import ScoredPair
from ..paired import PairingRules
from .claims import ClaimData
from .trials import TrialIndex

FINAL_KERNEL = "final_kernel.py"
TRANSCRIPT = "transcript.jsonl"
MAX_SHOWN_BYTES = 2_000_000   # an artifact larger than this is cut on the page (the store keeps it whole)


@dataclass
class PageContext:
    """What every drill-down page reads: the run's trials, its claims, category colours, the artifact files."""

    trials: TrialIndex
    claims: ClaimData
    colours: dict[str, str]
    artifacts: ArtifactStore
    synthetic: bool
    rules: PairingRules
    # Each resolved cell-replicate as the tables scored it, by (cell key, replicate).
    scored: Mapping[tuple, ScoredPair] = field(default_factory=dict)
    # The file name of each pair's page under pairs/, and of each chain hop's page under hops/ (trial id -> name).
    pair_pages: Mapping[tuple, str] = field(default_factory=dict)
    hop_pages: Mapping[str, str] = field(default_factory=dict)


class Artifact(NamedTuple):
    """An artifact as a page shows it (blocks.html.j2 `artifact`): its name on the page, its sha (None: the trial
    stored none) and its content (None: the file is missing from the store)."""

    name: str
    sha: Optional[str]
    content: Any


def read_text(ctx: PageContext, sha: Optional[str]) -> Optional[str]:
    """An artifact's text (undecodable bytes replaced), cut past MAX_SHOWN_BYTES; None: no sha, or no such file."""
    if not sha:
        return None
    try:
        data = ctx.artifacts.get(sha)
    except (ArtifactMissing, ValueError):
        return None
    text = data[:MAX_SHOWN_BYTES].decode("utf-8", errors="replace")
    return text if len(data) <= MAX_SHOWN_BYTES else text + f"\n… cut here: {len(data)} bytes in all"


def artifact(ctx: PageContext, sha: Optional[str], name: str, parse: Callable[[str], Any] = str) -> Artifact:
    """The artifact `sha` read for a page, its text turned into what the template shows by `parse`."""
    text = read_text(ctx, sha)
    return Artifact(name, sha, None if text is None else parse(text))
