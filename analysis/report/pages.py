"""The drill-down pages: one per trial (status, tier, submissions with their verdicts, final kernel, SKILL.md with
every claim highlighted by category and linked to its parents and children along the chain, the transcript), the
list pages that table rows link to, and the page of all trials.

Plain string templates over data loaded once (`TrialIndex`, `ClaimData`); the only per-trial reads are the
trial's own artifact files. A missing artifact is said so on the page, never an error.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence

from ...store import ArtifactMissing, ArtifactStore, TrialRow
from ..cells import Attempt, CellReplicate
from ..pairs import ScoredPair
from ..paired import PairingRules
from ..propagation import UNANNOTATED
from .claims import ClaimData, ClaimMark, Link
from .html import esc, link, none, page, table, tier_span
from .transcript import transcript_html
from .trials import SubmissionRow, TrialIndex
from .views import Members

FINAL_KERNEL = "final_kernel.py"
TRANSCRIPT = "transcript.jsonl"
LISTS_DIR = "lists"
LIST_TO_TRIALS = "../trials/"  # from a page in lists/ to the trial pages
MAX_SHOWN_BYTES = 2_000_000   # an artifact larger than this is cut on the page (the store keeps it whole)
COMPACT_AFTER = 500           # a list of more trials than this shows one row per chain


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


def _read(ctx: PageContext, sha: Optional[str]) -> Optional[str]:
    if not sha:
        return None
    try:
        data = ctx.artifacts.get(sha)
    except (ArtifactMissing, ValueError):
        return None
    text = data[:MAX_SHOWN_BYTES].decode("utf-8", errors="replace")
    return text if len(data) <= MAX_SHOWN_BYTES else text + f"\n… cut here: {len(data)} bytes in all"


def _num(value: Optional[float], digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _flag(value: Optional[bool]) -> str:
    return "–" if value is None else ("yes" if value else "no")


# -- one trial ------------------------------------------------------------------------------------------------
def _meta(ctx: PageContext, row: TrialRow) -> str:
    def trial_link(tid: Optional[str]) -> str:
        return link(ctx.trials.href(tid), tid) if tid else "–"

    items = [("model", esc(row.model)), ("problem", esc(row.problem_id)), ("DSL", esc(row.dsl)),
             ("target", esc(row.target)), ("kind", esc(row.kind)), ("arm", esc(row.arm_name or row.arm)),
             ("replicate", esc(row.replicate))]
    if row.kind == "chain_hop":
        chain = f"{row.model}/{row.problem_id}/chain{row.chain}"
        prev = ctx.trials.hop_trial.get((chain, (row.hop or 0) - 1))
        nxt = ctx.trials.hop_trial.get((chain, (row.hop or 0) + 1))
        items.append(("chain, hop", f"{esc(chain)}, hop {esc(row.hop)} (previous: {trial_link(prev)}, next: "
                                    f"{trial_link(nxt)})"))
    if row.skill_from:
        items.append(("SKILL.md from", trial_link(row.skill_from)))
    items += [("status", f'<strong id="status">{esc(row.status)}</strong>'), ("tier", tier_span(row.final_tier)),
              ("stop reason", esc(row.stop_reason or "–")), ("attempts", esc(row.attempts)),
              ("turns", esc(row.turns if row.turns is not None else "–")),
              ("submissions", f"{esc(row.n_submissions)} ({esc(row.counted_submissions)} counted)"
               if row.n_submissions is not None else "–"),
              ("tokens", f"prompt {esc(row.prompt_tokens)}, completion {esc(row.completion_tokens)}, cached "
                         f"{esc(row.cached_tokens)}" if row.prompt_tokens is not None else "–"),
              ("cost", f"{row.cost_usd:.4f} USD" if row.cost_usd is not None else "–"),
              ("wall", f"{row.wall_s:.1f} s" if row.wall_s is not None else "–"),
              ("synthetic", "yes" if row.synthetic else "no")]
    if row.error:
        items.append(("error", f"<pre>{esc(row.error)}</pre>"))
    return '<dl class="meta">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"


def _submissions(ctx: PageContext, tid: str, subs: Sequence[SubmissionRow]) -> str:
    if not subs:
        return none("no submissions stored")
    have = set(ctx.trials.artifacts.get(tid, {}).values())
    rows, sources = [], []
    for s in subs:
        label = "final" if s.is_final else str(s.idx)
        state = "final verdict" if s.is_final else ("counted" if s.counted else f"refused: {s.refused_reason}")
        rows.append([esc(label), esc(state), tier_span(s.tier), _flag(s.compiled), _flag(s.correct),
                     _num(s.speedup), _num(s.kernel_ms, 4), _num(s.eager_ms, 4), esc(s.rejected_by or "–"),
                     esc(s.reason or "–"), _num(s.round_trip_s, 2), _num(s.eval_s, 2), _num(s.queue_wait_s, 2)])
        if not s.is_final and s.kernel_sha in have:
            source = _read(ctx, s.kernel_sha)
            if source is not None:
                sources.append(f"<details><summary>submission {esc(s.idx)} source ({esc(s.kernel_bytes)} bytes)"
                               f"</summary><pre>{esc(source)}</pre></details>")
    headers = ["#", "state", "tier", "compiled", "correct", "speedup", "kernel ms", "eager ms", "rejected by",
               "reason", "round trip s", "eval s", "queue s"]
    return table(headers, rows, [False] * 5 + [True] * 3 + [False] * 2 + [True] * 3) + "".join(sources)


def _claim_links(ctx: PageContext, links: Sequence[Link], arrow: str, kind: str, to_trials: str = "") -> str:
    out = []
    for lk in links:
        target = ctx.trials.href(lk.trial_id, to_trials)
        label = f"{arrow}{lk.edge}"
        title = f"{kind} claim {lk.claim_id} ({lk.edge})"
        if target:
            out.append(f'<a class="lk" href="{esc(target)}#c-{esc(lk.claim_id)}" title="{esc(title)}">'
                       f"{esc(label)}</a>")
        else:
            out.append(f'<span class="lk" title="{esc(title)}">{esc(label)}</span>')
    return "".join(out)


def highlight_skill(ctx: PageContext, tid: str, text: str, marks: Sequence[ClaimMark], to_trials: str = "") -> str:
    """The SKILL.md text, escaped, each claim a span coloured by its category (anchor `c-<claim id>`), followed
    by links to its parent claims (↖, on the previous hop's page) and child claims (↘, on the next hop's);
    `to_trials`: the path from the page to trials/ ('' on a trial page)."""
    parents, children = ctx.claims.links(ctx.trials, tid)
    out, pos = [], 0
    for m in sorted(marks, key=lambda m: (m.start, m.end)):
        if m.start < pos or m.end <= m.start or m.end > len(text):
            continue   # overlapping or out of range (not this text's claims): left unmarked
        category = m.category or UNANNOTATED
        colour = ctx.colours.get(category, "#bbbbbb")
        title = f"{category} · {m.modality or '–'} · {m.support or '–'} · {m.claim_id}"
        links = (_claim_links(ctx, parents.get(m.claim_id, ()), "↖", "parent", to_trials)
                 + _claim_links(ctx, children.get(m.claim_id, ()), "↘", "child", to_trials))
        out.append(esc(text[pos:m.start]))
        out.append(f'<span class="claim cat-{esc(category)}" id="c-{esc(m.claim_id)}" data-category="{esc(category)}" '
                   f'style="background:{colour}55" title="{esc(title)}">{esc(text[m.start:m.end])}</span>{links}')
        pos = m.end
    out.append(esc(text[pos:]))
    return "<pre class=\"skill\">" + "".join(out) + "</pre>"


def _legend(ctx: PageContext, marks: Sequence[ClaimMark]) -> str:
    used = list(dict.fromkeys(m.category or UNANNOTATED for m in marks))
    return '<p class="legend">' + "".join(
        f'<span style="background:{ctx.colours.get(c, "#bbbbbb")}55">{esc(c)}</span>' for c in used) + "</p>"


def _skill(ctx: PageContext, row: TrialRow) -> str:
    if not row.skill_sha:
        return none("no SKILL.md stored")
    text = _read(ctx, row.skill_sha)
    if text is None:
        return none(f"SKILL.md is missing from the artifacts ({row.skill_sha})")
    if not text.strip():
        return none("SKILL.md is empty")
    marks = ctx.claims.marks(row.skill_sha)
    if not marks:
        return none("no claims stored for this SKILL.md") + f"<pre class=\"skill\">{esc(text)}</pre>"
    return _legend(ctx, marks) + highlight_skill(ctx, row.trial_id, text, marks)


def _artifact(ctx: PageContext, sha: Optional[str], name: str, show: Callable[[str], str]) -> str:
    if not sha:
        return none(f"no {name} stored")
    text = _read(ctx, sha)
    return none(f"{name} is missing from the artifacts ({sha})") if text is None else show(text)


def trial_page(ctx: PageContext, row: TrialRow) -> str:
    """The whole page of one trial (written to trials/<name>)."""
    tid = row.trial_id
    names = ctx.trials.artifacts.get(tid, {})
    hop_view = ctx.hop_pages.get(tid)
    body = [f"<h1>Trial {esc(tid)}</h1>", _meta(ctx, row),
            (f'<p>{link(f"../hops/{hop_view}", "This hop beside the one before it")} (the SKILL.md received and '
             "written, the lineage edges between them).</p>" if hop_view else ""),
            '<h2 id="submissions">Submissions and verdicts</h2>',
            _submissions(ctx, tid, ctx.trials.submissions.get(tid, ())),
            '<h2 id="kernel">Final kernel</h2>',
            _artifact(ctx, names.get(FINAL_KERNEL), "final kernel", lambda t: f"<pre>{esc(t)}</pre>"),
            '<h2 id="skill">SKILL.md</h2>', _skill(ctx, row),
            '<h2 id="transcript">Transcript</h2>',
            _artifact(ctx, names.get(TRANSCRIPT), "transcript", transcript_html)]
    return page(f"trial {tid}", "\n".join(body), ctx.synthetic, root="../")


# -- lists ------------------------------------------------------------------------------------------------------
def _arm(ctx: PageContext, attempt: Optional[Attempt]) -> str:
    if attempt is None:
        return "not run"
    href = ctx.trials.href(attempt.trial_id, LIST_TO_TRIALS)
    state = attempt.tier if attempt.status == "completed" else attempt.status
    return f'{link(href, attempt.trial_id)} {tier_span(state) if state in ("pass", "pass2x", "fail") else esc(state)}'


def _cell_rows(ctx: PageContext, cells: Sequence[CellReplicate]) -> str:
    rows = []
    for cr in cells:
        pair = ctx.scored.get((cr.cell_key, cr.replicate))
        result = pair.outcome if pair is not None else "unresolved"
        place = (f"{pair.standing or 'unplaced'} (own base: {pair.paper_standing})" if pair is not None else "–")
        page_name = ctx.pair_pages.get((cr.cell_key, cr.replicate))
        paired = link(f"../pairs/{page_name}", "side by side") if page_name else "–"
        rows.append([esc(cr.model), esc(cr.problem_id), esc(cr.direction), esc(cr.replicate), esc(result),
                     esc(place), _arm(ctx, cr.source), _arm(ctx, cr.base), _arm(ctx, cr.skill), paired])
    return table(["model", "problem", "direction", "replicate", "outcome", "source vs base", "source", "base",
                  "skill", "paired view"], rows, [False, False, False, True])


def trial_rows_table(ctx: PageContext, ids: Sequence[str], to_trials: str) -> str:
    """One row per trial: a link to its page and its figures (final speedup from the final verdict)."""
    by_id, subs = ctx.trials.by_id, ctx.trials.submissions
    rows = []
    for tid in ids:
        r = by_id.get(tid)
        if r is None:
            continue
        final = next((s for s in subs.get(tid, ()) if s.is_final), None)
        rows.append(f'<tr><td><a href="{esc(to_trials + ctx.trials.page[tid])}">{esc(tid)}</a></td>'
                    f"<td>{esc(r.model)}</td><td>{esc(r.problem_id)}</td><td>{esc(r.dsl)}</td><td>{esc(r.kind)}</td>"
                    f"<td>{esc(r.arm_name or r.arm)}</td><td class=\"n\">{esc(r.hop if r.hop is not None else '')}</td>"
                    f"<td>{esc(r.status)}</td><td>{tier_span(r.final_tier)}</td>"
                    f"<td class=\"n\">{_num(final.speedup if final else None, 2)}</td></tr>\n")
    head = "".join(f"<th>{h}</th>" for h in ("trial", "model", "problem", "DSL", "kind", "arm", "hop", "status",
                                             "tier", "speedup"))
    return f"<table><thead><tr>{head}</tr></thead><tbody>\n{''.join(rows)}</tbody></table>"


def compact_rows(ctx: PageContext, ids: Sequence[str], to_trials: str) -> str:
    """A long list of chain hops as one row per chain with a link per hop (hop number and tier), so a category's
    list over a chain-100 campaign stays a page a browser opens at once; other trials one row each."""
    by_id = ctx.trials.by_id
    chains: dict[str, list[str]] = {}
    for tid in ids:
        r = by_id.get(tid)
        if r is None:
            continue
        key = f"{r.model}/{r.problem_id}/chain{r.chain}" if r.kind == "chain_hop" else tid
        chains.setdefault(key, []).append(tid)
    rows = []
    for key, members in chains.items():
        cells = " ".join(f'<a href="{esc(to_trials + ctx.trials.page[t])}" class="tier-{esc(by_id[t].final_tier)}">'
                         f'{"h" + str(by_id[t].hop) if by_id[t].hop is not None else esc(t)}</a>' for t in members)
        rows.append(f"<tr><td>{esc(key)}</td><td class=\"n\">{len(members)}</td><td>{cells}</td></tr>\n")
    return ("<table><thead><tr><th>chain (or trial)</th><th>trials</th><th>hops (coloured by tier)</th></tr></thead>"
            f"<tbody>\n{''.join(rows)}</tbody></table>")


def list_page(ctx: PageContext, members: Members) -> str:
    """The page a table row links to (it lives in lists/)."""
    parts = [f"<h1>{esc(members.title)}</h1>", f"<p>{members.n_trials} trials.</p>"]
    if members.cells:
        parts.append(_cell_rows(ctx, members.cells))
    if len(members.trial_ids) > COMPACT_AFTER:
        parts.append(compact_rows(ctx, members.trial_ids, LIST_TO_TRIALS))
    elif members.trial_ids:
        parts.append(trial_rows_table(ctx, members.trial_ids, LIST_TO_TRIALS))
    if members.empty:
        parts.append(none())
    return page(members.title, "\n".join(parts), ctx.synthetic, root="../")


def all_trials_page(ctx: PageContext) -> str:
    """trials.html at the report root: every trial of the run, in plan order."""
    ids = [r.trial_id for r in ctx.trials.rows]
    body = trial_rows_table(ctx, ids, "trials/")
    return page("all trials", f"<h1>All trials ({len(ids)})</h1>\n{body}" if ids else none("no trials"),
                ctx.synthetic)
