"""The paired view: what no eval viewer shows — the two attempts a comparison is made of, side by side, and the
SKILL.md that went from one to the other.

- `pair_page`: one resolved cell-replicate (pairs/<name>.html): its outcome, standing and ΔGM term as the tables
  scored them; the source's SKILL.md — the only thing handed over — with its claims coloured by category; then the
  base attempt (solo in the target DSL) and the skill-conditioned attempt in two columns: status, submissions and
  verdicts, final kernel, transcript.
- `hop_pages`: a page per chain hop k ≥ 1 (hops/<name>.html): the SKILL.md it received (hop k−1's) and the one it
  wrote, side by side with claims coloured, the lineage edges between them (parent claim → child claim, edge type),
  and a line diff of the two texts.

Both live one folder below the report root, like the trial pages, so their links to trials go through
`../trials/`. This module gathers what the pages show; pair.html.j2, hop.html.j2 and pairs_index.html.j2 write it.
"""
from __future__ import annotations

import difflib
import math
from typing import Iterator, Mapping, NamedTuple, Optional, Sequence

from markupsafe import Markup

from ...store import SubmissionRow, TrialRow
from ..cells import Attempt
from ..pairs import ScoredPair
from .context import FINAL_KERNEL, TRANSCRIPT, Artifact, PageContext, artifact, read_text
from .html import macros, render
from .pages import Source, sources
from .skill_view import handed_skill, skill_of
from .transcript import Event, transcript_events
from .trials import TrialIndex, file_stem

PAIRS_DIR = "pairs"
HOPS_DIR = "hops"
PAIRS_INDEX = "pairs.html"
TRANSCRIPT_INLINE_CHARS = 40_000   # longer transcripts are linked, not copied (see Column)
TO_TRIALS = "../trials/"


class Column(NamedTuple):
    """One attempt's column on a pair page (None `attempt`: not run). `transcript` is None when none is stored or
    when it is too long to copy; then `transcript_chars` ('12,345') says how long it is."""

    role: str
    side_id: str
    attempt: Optional[Attempt]
    href: Optional[str] = None
    subs: Sequence[SubmissionRow] = ()
    sources: Sequence[Source] = ()
    kernel: Optional[Artifact] = None
    transcript: Optional[list[Event]] = None
    transcript_chars: str = ""
    error: Optional[str] = None


class HopColumn(NamedTuple):
    """One hop's column on a hop page: its trial (None: no trial at this hop), row and SKILL.md block (Markup
    rendered by skill.html.j2, so that the next hop's page can reuse it)."""

    what: str
    trial_id: Optional[str]
    row: Optional[TrialRow]
    skill: Markup


def pair_name(pair: ScoredPair) -> str:
    """The pair page's file name inside pairs/."""
    cr = pair.cr
    return file_stem(f"{cr.model}__{cr.target}__{cr.problem_id}__{cr.direction}__r{cr.replicate}", 180) + ".html"


def hop_name(chain_id: str, hop: int) -> str:
    """The hop page's file name inside hops/."""
    return file_stem(f"{chain_id}__h{hop}", 180) + ".html"


def _column(ctx: PageContext, attempt: Optional[Attempt], role: str) -> Column:
    side_id = role.split()[0].lower()
    if attempt is None:
        return Column(role, side_id, None)
    tid = attempt.trial_id
    row = ctx.trials.by_id.get(tid)
    names = ctx.trials.artifacts.get(tid, {})
    subs = ctx.trials.submissions.get(tid, ())
    text = read_text(ctx, names.get(TRANSCRIPT))
    inline = text is not None and len(text) <= TRANSCRIPT_INLINE_CHARS
    return Column(role, side_id, attempt, ctx.trials.href(tid, TO_TRIALS), subs, sources(ctx, tid, subs),
                  artifact(ctx, names.get(FINAL_KERNEL), "final kernel"),
                  transcript_events(text) if inline else None,
                  f"{len(text):,}" if text is not None and not inline else "",
                  row.error if row is not None else None)


def pair_page(ctx: PageContext, pair: ScoredPair) -> str:
    """The page of one resolved cell-replicate (see the module docstring)."""
    cr = pair.cr
    term = ("–" if pair.log_ratio is None
            else f"{pair.log_ratio:+.3f} (base / skill end-to-end time ×{math.exp(pair.log_ratio):.3f})")
    source = cr.source
    heading = f"{cr.model} · {cr.problem_id} · {cr.direction} · r{cr.replicate}"
    handed = handed_skill(ctx, *skill_of(ctx, source.trial_id if source else None), "the source attempt", TO_TRIALS)
    return render("pair.html.j2", title=f"pair {heading}", synthetic=ctx.synthetic, root="../", heading=heading,
                  cr=cr, pair=pair, term=term, drawn=pair.standing_base, source=source, trials=ctx.trials,
                  to_trials=TO_TRIALS, handed=handed,
                  base=_column(ctx, cr.base, f"Base (solo in {cr.target_dsl})"),
                  skilled=_column(ctx, cr.skill, f"Skill-conditioned (in {cr.target_dsl})"))


def _claim_texts(ctx: PageContext, row: Optional[TrialRow], text: Optional[str]) -> dict[str, str]:
    if row is None or text is None:
        return {}
    return {m.claim_id: text[m.start:m.end] for m in ctx.claims.marks(row.skill_sha) if 0 <= m.start < m.end}


def _diff(before: str, after: str) -> list[tuple[str, str]]:
    """The unified diff of two texts as (kind, line): kind 'add', 'del' or '' (context and headers)."""
    lines = []
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), "hop k−1", "hop k", lineterm="", n=1):
        kind = "add" if line.startswith("+") and not line.startswith("+++") else (
            "del" if line.startswith("-") and not line.startswith("---") else "")
        lines.append((kind, line))
    return lines


def _hop_page(ctx: PageContext, chain_id: str, hop: int,
              carried: Mapping[str, Markup]) -> tuple[str, dict[str, Markup]]:
    """The page of chain hop `hop` (≥ 1) against the hop before (see the module docstring), and the SKILL.md block
    of the hop's own trial for the next hop's page when it is coloured (it reads the same there)."""
    before, after = ctx.trials.hop_trial.get((chain_id, hop - 1)), ctx.trials.hop_trial.get((chain_id, hop))
    skills = {tid: skill_of(ctx, tid) for tid in (before, after)}
    texts = {**_claim_texts(ctx, *skills[before]), **_claim_texts(ctx, *skills[after])}
    skill_block = macros("skill.html.j2").skill
    keep: dict[str, Markup] = {}

    def column(tid: Optional[str], what: str) -> HopColumn:
        row, text = skills[tid]
        block = carried.get(tid) if tid else None
        if block is None:
            view = handed_skill(ctx, row, text, what, TO_TRIALS)
            block = skill_block(view)          # Markup: skill.html.j2's output, everything in it escaped there
            if tid and view.pieces:            # a note would name `what`; coloured text does not
                keep[tid] = block
        return HopColumn(what, tid, row, block)

    edges = [(texts.get(p, p), edge, texts.get(c, c)) for p, c, edge in ctx.claims.edges.get((chain_id, hop), ())]
    received = column(before, f"Received: hop {hop - 1}")
    written = column(after, f"Written: hop {hop}")
    page = render("hop.html.j2", title=f"{chain_id} hop {hop}", synthetic=ctx.synthetic, root="../",
                  chain_id=chain_id, hop=hop, trials=ctx.trials, to_trials=TO_TRIALS, received=received,
                  written=written, edges=edges, diff=_diff(skills[before][1] or "", skills[after][1] or ""))
    return page, {after: keep[after]} if after in keep else {}


def hop_pages(ctx: PageContext, hops: Sequence[tuple[str, int]]) -> Iterator[tuple[str, str]]:
    """Each chain hop's (file name under hops/, page), in the order given. The SKILL.md hop k wrote is shown again
    on hop k+1's page as the one received: coloured once and carried over, since escaping every claim of every
    SKILL.md twice was a third of the hop pages' time on a chain-100 campaign."""
    carried: Mapping[str, Markup] = {}
    for chain, hop in hops:
        page, carried = _hop_page(ctx, chain, hop, carried)
        yield hop_name(chain, hop), page


def chain_hops_of(trials: TrialIndex) -> list[tuple[str, int]]:
    """Every (chain, hop ≥ 1) whose hop and the hop before it have trials, in order."""
    return sorted((chain, hop) for chain, hop in trials.hop_trial if hop >= 1 and (chain, hop - 1) in trials.hop_trial)


def pairs_index(ctx: PageContext, pairs: Sequence[ScoredPair], hops: Sequence[tuple[str, int]]) -> str:
    """pairs.html at the report root: every cell-replicate's paired page and every chain hop's page."""
    return render("pairs_index.html.j2", title="paired views", synthetic=ctx.synthetic, root="",
                  pairs=[(p, f"{PAIRS_DIR}/{pair_name(p)}") for p in pairs],
                  hops=[(f"{c}: hop {h - 1} → {h}", f"{HOPS_DIR}/{hop_name(c, h)}") for c, h in hops])
