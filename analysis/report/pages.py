"""The drill-down pages: one per trial (status, tier, submissions with their verdicts, final kernel, SKILL.md with
every claim highlighted by category and linked to its parents and children along the chain, the transcript), the
list pages that table rows link to, and the page of all trials.

This module gathers what each page shows from data loaded once (`PageContext`); the templates trial.html.j2,
list.html.j2 and all_trials.html.j2 write it. A missing artifact is said so on the page, never an error.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

from ...store import SubmissionRow, TrialRow
from ..cells import CellReplicate
from .causal import hand_off_view
from .context import FINAL_KERNEL, TRANSCRIPT, PageContext, artifact, read_text
from .html import render
from .skill_view import trial_skill
from .transcript import transcript_events
from .views import Members

LISTS_DIR = "lists"
LIST_TO_TRIALS = "../trials/"  # from a page in lists/ to the trial pages
COMPACT_AFTER = 500           # a list of more trials than this shows one row per chain


class Source(NamedTuple):
    """A judged submission's source, shown folded under the submissions table."""

    idx: int
    n_bytes: Optional[int]
    text: str


class TrialLine(NamedTuple):
    """One trial's row in a list: its link and its final speedup (from the final verdict)."""

    row: TrialRow
    href: str
    speedup: Optional[float]


class HopLink(NamedTuple):
    href: str
    tier: Optional[str]
    label: str            # 'h<hop>', or the trial id outside chains


class ChainLine(NamedTuple):
    """One chain (or one trial outside chains) in a compact list."""

    key: str
    hops: tuple[HopLink, ...]


class CellLine(NamedTuple):
    """One cell-replicate in a list: its outcome and standing as the tables scored them, its paired page."""

    cr: CellReplicate
    outcome: str
    place: str
    pair_page: Optional[str]


def sources(ctx: PageContext, tid: str, subs: Sequence[SubmissionRow]) -> list[Source]:
    """The source of each judged submission the trial stored (the final one is the kernel shown below)."""
    have = set(ctx.trials.artifacts.get(tid, {}).values())
    out = []
    for s in subs:
        if not s.is_final and s.kernel_sha in have:
            text = read_text(ctx, s.kernel_sha)
            if text is not None:
                out.append(Source(s.idx, s.kernel_bytes, text))
    return out


# -- one trial ------------------------------------------------------------------------------------------------
def trial_page(ctx: PageContext, row: TrialRow) -> str:
    """The whole page of one trial (written to trials/<name>)."""
    tid = row.trial_id
    names = ctx.trials.artifacts.get(tid, {})
    subs = ctx.trials.submissions.get(tid, ())
    chain = previous = following = None
    if row.kind == "chain_hop":
        chain = f"{row.model}/{row.problem_id}/chain{row.chain}"
        previous = ctx.trials.hop_trial.get((chain, (row.hop or 0) - 1))
        following = ctx.trials.hop_trial.get((chain, (row.hop or 0) + 1))
    return render("trial.html.j2", title=f"trial {tid}", synthetic=ctx.synthetic, root="../", row=row,
                  trials=ctx.trials, chain=chain, previous=previous, next=following,
                  hop_view=ctx.hop_pages.get(tid), subs=subs, sources=sources(ctx, tid, subs),
                  kernel=artifact(ctx, names.get(FINAL_KERNEL), "final kernel"), skill_md=trial_skill(ctx, row),
                  intervention=hand_off_view(ctx, row),
                  transcript_file=artifact(ctx, names.get(TRANSCRIPT), "transcript", transcript_events))


# -- lists ------------------------------------------------------------------------------------------------------
def cell_lines(ctx: PageContext, cells: Sequence[CellReplicate]) -> list[CellLine]:
    out = []
    for cr in cells:
        pair = ctx.scored.get((cr.cell_key, cr.replicate))
        place = f"{pair.standing or 'unplaced'} (own base: {pair.paper_standing})" if pair is not None else "–"
        out.append(CellLine(cr, pair.outcome if pair is not None else "unresolved", place,
                            ctx.pair_pages.get((cr.cell_key, cr.replicate))))
    return out


def trial_lines(ctx: PageContext, ids: Sequence[str], to_trials: str) -> list[TrialLine]:
    """One row per trial of `ids` in the run; `to_trials`: the path from the page to trials/."""
    by_id, subs = ctx.trials.by_id, ctx.trials.submissions
    out = []
    for tid in ids:
        r = by_id.get(tid)
        if r is None:
            continue
        final = next((s for s in subs.get(tid, ()) if s.is_final), None)
        out.append(TrialLine(r, to_trials + ctx.trials.page[tid], final.speedup if final else None))
    return out


def chain_lines(ctx: PageContext, ids: Sequence[str], to_trials: str) -> list[ChainLine]:
    """A long list of chain hops as one row per chain with a link per hop (hop number and tier), so a category's
    list over a chain-100 campaign stays a page a browser opens at once; other trials one row each."""
    by_id = ctx.trials.by_id
    chains: dict[str, list[HopLink]] = {}
    for tid in ids:
        r = by_id.get(tid)
        if r is None:
            continue
        key = f"{r.model}/{r.problem_id}/chain{r.chain}" if r.kind == "chain_hop" else tid
        chains.setdefault(key, []).append(HopLink(to_trials + ctx.trials.page[tid], r.final_tier,
                                                  f"h{r.hop}" if r.hop is not None else tid))
    return [ChainLine(key, tuple(hops)) for key, hops in chains.items()]


def list_page(ctx: PageContext, members: Members) -> str:
    """The page a table row links to (it lives in lists/)."""
    ids = members.trial_ids
    compact = len(ids) > COMPACT_AFTER
    return render("list.html.j2", title=members.title, synthetic=ctx.synthetic, root="../", members=members,
                  trials=ctx.trials, to_trials=LIST_TO_TRIALS, cells=cell_lines(ctx, members.cells),
                  chains=chain_lines(ctx, ids, LIST_TO_TRIALS) if compact else None,
                  lines=trial_lines(ctx, ids, LIST_TO_TRIALS) if ids and not compact else None)


def all_trials_page(ctx: PageContext) -> str:
    """trials.html at the report root: every trial of the run, in plan order."""
    lines = trial_lines(ctx, [r.trial_id for r in ctx.trials.rows], "trials/")
    return render("all_trials.html.j2", title="all trials", synthetic=ctx.synthetic, root="", lines=lines)
