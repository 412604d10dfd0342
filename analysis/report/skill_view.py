"""A SKILL.md as the trial, pair and hop pages show it: the text cut at its claims, each claim with its category's
colour and its links to the claims it came from (↖, on the previous hop's page) and to those it became (↘, on the
next hop's) — or a note saying why there is nothing to colour. skill.html.j2 writes the markup; this module only
decides what goes where.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Optional, Sequence

from ...store import TrialRow
from ..propagation import UNANNOTATED
from .claims import ClaimMark, Link
from .context import PageContext, read_text

NO_COLOUR = "#bbbbbb"


class ClaimLink(NamedTuple):
    """A lineage edge beside a claim: `href` is the other claim's anchor (None: its trial is not in the run)."""

    href: Optional[str]
    label: str            # the arrow and the edge type, '↖copied'
    title: str


class ClaimSpan(NamedTuple):
    """One claim's span: its anchor id, category (UNANNOTATED when it has none), colour and hover title."""

    claim_id: str
    category: str
    colour: str
    title: str
    links: tuple[ClaimLink, ...]


class Piece(NamedTuple):
    """A run of the text: a claim (`claim` set) or the text between claims."""

    text: str
    claim: Optional[ClaimSpan] = None


@dataclass(frozen=True)
class SkillView:
    """What skill.html.j2 shows: `note` (why nothing is coloured), the plain `text` when there are no claims to
    colour, else the `legend` (category, colour) of the categories used and the text as `pieces`."""

    note: Optional[str] = None
    text: Optional[str] = None
    legend: tuple[tuple[str, str], ...] = ()
    pieces: tuple[Piece, ...] = ()


def _links(ctx: PageContext, links: Sequence[Link], arrow: str, kind: str, to_trials: str) -> list[ClaimLink]:
    out = []
    for lk in links:
        target = ctx.trials.href(lk.trial_id, to_trials)
        out.append(ClaimLink(f"{target}#c-{lk.claim_id}" if target else None, f"{arrow}{lk.edge}",
                             f"{kind} claim {lk.claim_id} ({lk.edge})"))
    return out


def coloured(ctx: PageContext, tid: str, text: str, marks: Sequence[ClaimMark], to_trials: str = "") -> SkillView:
    """The text with its claims coloured and linked; `to_trials`: the path from the page to trials/ ('' on a
    trial page)."""
    parents, children = ctx.claims.links(ctx.trials, tid)
    pieces, pos = [], 0
    for m in sorted(marks, key=lambda m: (m.start, m.end)):
        if m.start < pos or m.end <= m.start or m.end > len(text):
            continue   # overlapping or out of range (not this text's claims): left unmarked
        category = m.category or UNANNOTATED
        title = f"{category} · {m.modality or '–'} · {m.support or '–'} · {m.claim_id}"
        links = (_links(ctx, parents.get(m.claim_id, ()), "↖", "parent", to_trials)
                 + _links(ctx, children.get(m.claim_id, ()), "↘", "child", to_trials))
        pieces += [Piece(text[pos:m.start]), Piece(text[m.start:m.end], ClaimSpan(
            m.claim_id, category, ctx.colours.get(category, NO_COLOUR), title, tuple(links)))]
        pos = m.end
    pieces.append(Piece(text[pos:]))
    used = dict.fromkeys(m.category or UNANNOTATED for m in marks)
    return SkillView(legend=tuple((c, ctx.colours.get(c, NO_COLOUR)) for c in used), pieces=tuple(pieces))


def trial_skill(ctx: PageContext, row: TrialRow) -> SkillView:
    """A trial's own SKILL.md on its trial page."""
    if not row.skill_sha:
        return SkillView(note="no SKILL.md stored")
    text = read_text(ctx, row.skill_sha)
    if text is None:
        return SkillView(note=f"SKILL.md is missing from the artifacts ({row.skill_sha})")
    if not text.strip():
        return SkillView(note="SKILL.md is empty")
    marks = ctx.claims.marks(row.skill_sha)
    if not marks:
        return SkillView(note="no claims stored for this SKILL.md", text=text)
    return coloured(ctx, row.trial_id, text, marks)


def skill_of(ctx: PageContext, trial_id: Optional[str]) -> tuple[Optional[TrialRow], Optional[str]]:
    """A trial's row and its SKILL.md text (None: no such trial, or no SKILL.md stored), read once per page."""
    row = ctx.trials.by_id.get(trial_id) if trial_id else None
    return row, (read_text(ctx, row.skill_sha) if row is not None and row.skill_sha else None)


def handed_skill(ctx: PageContext, row: Optional[TrialRow], text: Optional[str], what: str,
                 to_trials: str) -> SkillView:
    """A trial's SKILL.md (`skill_of`) on a pair or hop page, one folder below the root; `what` names the trial."""
    if row is None or not row.skill_sha:
        return SkillView(note=f"no SKILL.md stored for {what}")
    if text is None or not text.strip():
        return SkillView(note=f"the SKILL.md of {what} is empty or missing")
    marks = ctx.claims.marks(row.skill_sha)
    if not marks:
        return SkillView(note="no claims stored for this SKILL.md (run `mkb lineage`)", text=text)
    return coloured(ctx, row.trial_id, text, marks, to_trials)
