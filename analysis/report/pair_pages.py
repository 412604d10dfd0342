"""The paired view: what no eval viewer shows — the two attempts a comparison is made of, side by side, and the
SKILL.md that went from one to the other.

- `pair_page`: one resolved cell-replicate (pairs/<name>.html): its outcome, standing and ΔGM term as the tables
  scored them; the source's SKILL.md — the only thing handed over — with its claims coloured by category; then the
  base attempt (solo in the target DSL) and the skill-conditioned attempt in two columns: status, submissions and
  verdicts, final kernel, transcript.
- `hop_page`: one chain hop k ≥ 1 (hops/<name>.html): the SKILL.md it received (hop k−1's) and the one it wrote, side
  by side with claims coloured, the lineage edges between them (parent claim → child claim, edge type), and a
  line diff of the two texts.

Both live one folder below the report root, like the trial pages, so their links to trials go through
`../trials/`.
"""
from __future__ import annotations

import difflib
import math
from typing import Optional, Sequence

from ..cells import Attempt
from ..pairs import ScoredPair
from .html import esc, link, none, page, tier_span
from .pages import FINAL_KERNEL, TRANSCRIPT, PageContext, _artifact, _legend, _read, _submissions, highlight_skill
from .transcript import transcript_html
from .trials import TrialIndex, file_stem
from ...store import TrialRow

PAIRS_DIR = "pairs"
HOPS_DIR = "hops"
PAIRS_INDEX = "pairs.html"
TRANSCRIPT_INLINE_CHARS = 40_000   # longer transcripts are linked, not copied (see _attempt_column)
TO_TRIALS = "../trials/"

PAIR_CSS = ('<style>.sides{display:grid;grid-template-columns:1fr 1fr;gap:1.2em}.sides>div{min-width:0}'
            '.sides table{display:block;overflow-x:auto;max-width:100%}'
            '.diff .add{background:#e6ffec}.diff .del{background:#ffebe9}</style>')


def pair_name(pair: ScoredPair) -> str:
    """The pair page's file name inside pairs/."""
    cr = pair.cr
    return file_stem(f"{cr.model}__{cr.target}__{cr.problem_id}__{cr.direction}__r{cr.replicate}", 180) + ".html"


def hop_name(chain_id: str, hop: int) -> str:
    """The hop page's file name inside hops/."""
    return file_stem(f"{chain_id}__h{hop}", 180) + ".html"


def _skill_of(ctx: PageContext, trial_id: Optional[str]) -> tuple[Optional[TrialRow], Optional[str]]:
    """A trial's row and its SKILL.md text (None: no such trial, or no SKILL.md stored), read once per page."""
    row = ctx.trials.by_id.get(trial_id) if trial_id else None
    return row, (_read(ctx, row.skill_sha) if row is not None and row.skill_sha else None)


def _skill_block(ctx: PageContext, row: Optional[TrialRow], text: Optional[str], what: str) -> str:
    """A trial's SKILL.md (`_skill_of`) with its claims coloured and linked (links relative to pairs/ and hops/)."""
    if row is None or not row.skill_sha:
        return none(f"no SKILL.md stored for {what}")
    if text is None or not text.strip():
        return none(f"the SKILL.md of {what} is empty or missing")
    marks = ctx.claims.marks(row.skill_sha)
    if not marks:
        return none("no claims stored for this SKILL.md (run `mkb lineage`)") + f'<pre class="skill">{esc(text)}</pre>'
    return _legend(ctx, marks) + highlight_skill(ctx, row.trial_id, text, marks, TO_TRIALS)


def _attempt_column(ctx: PageContext, attempt: Optional[Attempt], role: str) -> str:
    if attempt is None:
        return f"<h2>{esc(role)}</h2>" + none("not run")
    tid = attempt.trial_id
    row = ctx.trials.by_id.get(tid)
    names = ctx.trials.artifacts.get(tid, {})
    state = attempt.tier if attempt.status == "completed" else attempt.status
    head = (f"<h2>{esc(role)}</h2><p>{link(ctx.trials.href(tid, TO_TRIALS), tid)} · {tier_span(state)} · "
            f"stop: {esc(attempt.stop_reason or '–')}"
            + (f" · kernel {attempt.kernel_ms:.4g} ms, eager {attempt.eager_ms:.4g} ms"
               if attempt.kernel_ms and attempt.eager_ms else "") + "</p>")
    body = [head, "<h3>Submissions and verdicts</h3>", _submissions(ctx, tid, ctx.trials.submissions.get(tid, ())),
            "<h3>Final kernel</h3>",
            _artifact(ctx, names.get(FINAL_KERNEL), "final kernel", lambda t: f"<pre>{esc(t)}</pre>")]
    text = _read(ctx, names.get(TRANSCRIPT)) if names.get(TRANSCRIPT) else None
    on_trial_page = link(f"{ctx.trials.href(tid, TO_TRIALS)}#transcript", "on the trial page")
    if text is None:
        body.append(none("no transcript stored"))
    elif len(text) <= TRANSCRIPT_INLINE_CHARS:
        body.append(f"<details><summary>Transcript</summary>{transcript_html(text)}</details>")
    else:
        # A benchmark holds thousands of pairs: long transcripts stay on their trial page, not copied into each.
        body.append(f"<p>Transcript ({len(text):,} characters): {on_trial_page}.</p>")
    if row is not None and row.error:
        body.append(f"<pre>{esc(row.error)}</pre>")
    return f'<div class="side" id="{esc(role.split()[0].lower())}">' + "".join(body) + "</div>"


def pair_page(ctx: PageContext, pair: ScoredPair) -> str:
    """The page of one resolved cell-replicate (see the module docstring)."""
    cr = pair.cr
    term = ("–" if pair.log_ratio is None
            else f"{pair.log_ratio:+.3f} (base / skill end-to-end time ×{math.exp(pair.log_ratio):.3f})")
    source = cr.source
    drawn = pair.standing_base
    drawn_link = f" ({link(ctx.trials.href(drawn.trial_id, TO_TRIALS), drawn.trial_id)})" if drawn else ""
    summary = [("model", esc(cr.model)), ("problem", esc(cr.problem_id)), ("target", esc(cr.target)),
               ("direction", esc(cr.direction)), ("replicate", esc(cr.replicate)),
               ("outcome", f'<strong id="outcome">{esc(pair.outcome)}</strong>'),
               ("standing", f"{esc(pair.standing or 'unplaced')} against another replicate's base{drawn_link}; "
                            f"{esc(pair.paper_standing)} against its own base (the paper's grouping)"),
               ("ΔGM term", esc(term))]
    meta = '<dl class="meta">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in summary) + "</dl>"
    handed = (f'<h2 id="handed-over">SKILL.md handed over</h2><p>Written by the source attempt '
              f"{link(ctx.trials.href(source.trial_id, TO_TRIALS), source.trial_id) if source else '–'} "
              f"({tier_span(source.tier if source else None)} in {esc(cr.source_dsl)}); the skill-conditioned attempt "
              f"received it as its only extra input.</p>"
              + _skill_block(ctx, *_skill_of(ctx, source.trial_id if source else None), "the source attempt"))
    sides = ('<div class="sides">' + _attempt_column(ctx, cr.base, f"Base (solo in {cr.target_dsl})")
             + _attempt_column(ctx, cr.skill, f"Skill-conditioned (in {cr.target_dsl})") + "</div>")
    title = f"{cr.model} · {cr.problem_id} · {cr.direction} · r{cr.replicate}"
    return page(f"pair {title}", f"{PAIR_CSS}<h1>Cell-replicate {esc(title)}</h1>{meta}{handed}{sides}",
                ctx.synthetic, root="../")


def _edges_table(ctx: PageContext, chain_id: str, hop: int, texts: dict[str, str]) -> str:
    edges = ctx.claims.edges.get((chain_id, hop), ())
    if not edges:
        return none("no lineage edges stored for this hop (every claim here is new, or `mkb lineage` has not run)")
    rows = "".join(f"<tr><td>{esc(texts.get(p, p))}</td><td>{esc(edge)}</td><td>{esc(texts.get(c, c))}</td></tr>"
                   for p, c, edge in edges)
    return ("<table><thead><tr><th>parent claim (hop k−1)</th><th>edge</th><th>child claim (hop k)</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def _claim_texts(ctx: PageContext, row: Optional[TrialRow], text: Optional[str]) -> dict[str, str]:
    if row is None or text is None:
        return {}
    return {m.claim_id: text[m.start:m.end] for m in ctx.claims.marks(row.skill_sha) if 0 <= m.start < m.end}


def _diff(before: str, after: str) -> str:
    lines = []
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), "hop k−1", "hop k", lineterm="", n=1):
        kind = "add" if line.startswith("+") and not line.startswith("+++") else (
            "del" if line.startswith("-") and not line.startswith("---") else "")
        lines.append(f'<span class="{kind}">{esc(line)}</span>' if kind else esc(line))
    return '<pre class="diff">' + "\n".join(lines) + "</pre>" if lines else none("the two texts are the same")


def hop_page(ctx: PageContext, chain_id: str, hop: int) -> str:
    """The page of chain hop `hop` (≥ 1) against the hop before (see the module docstring)."""
    before, after = ctx.trials.hop_trial.get((chain_id, hop - 1)), ctx.trials.hop_trial.get((chain_id, hop))
    skills = {tid: _skill_of(ctx, tid) for tid in (before, after)}
    texts = {**_claim_texts(ctx, *skills[before]), **_claim_texts(ctx, *skills[after])}

    def text_of(tid: Optional[str]) -> str:
        return skills[tid][1] or ""

    def column(tid: Optional[str], what: str) -> str:
        row = skills[tid][0]
        head = (f"<h2>{esc(what)}</h2><p>{link(ctx.trials.href(tid, TO_TRIALS), tid)} · "
                f"{tier_span(row.final_tier if row else None)} · {esc(row.dsl if row else '–')}</p>") if tid else \
            f"<h2>{esc(what)}</h2>"
        return f'<div class="side">{head}{_skill_block(ctx, *skills[tid], what)}</div>'

    body = [f"<h1>Chain {esc(chain_id)}: hop {hop - 1} → hop {hop}</h1>",
            f"<p>Hop {hop} received hop {hop - 1}'s SKILL.md and wrote its own; the lineage edges say which of its "
            "claims carry which of the received ones (docs/metrics.md, Lineage).</p>",
            '<div class="sides">' + column(before, f"Received: hop {hop - 1}") + column(after, f"Written: hop {hop}")
            + "</div>", '<h2 id="edges">Lineage edges</h2>', _edges_table(ctx, chain_id, hop, texts),
            '<h2 id="diff">Line diff of the two SKILL.md files</h2>', _diff(text_of(before), text_of(after))]
    return page(f"{chain_id} hop {hop}", PAIR_CSS + "\n".join(body), ctx.synthetic, root="../")


def chain_hops_of(trials: TrialIndex) -> list[tuple[str, int]]:
    """Every (chain, hop ≥ 1) whose hop and the hop before it have trials, in order."""
    return sorted((chain, hop) for chain, hop in trials.hop_trial if hop >= 1 and (chain, hop - 1) in trials.hop_trial)


def pairs_index(ctx: PageContext, pairs: Sequence[ScoredPair], hops: Sequence[tuple[str, int]]) -> str:
    """pairs.html at the report root: every cell-replicate's paired page and every chain hop's page."""
    rows = "".join(f"<tr><td>{link(f'{PAIRS_DIR}/{pair_name(p)}', f'{p.cr.model} · {p.cr.problem_id}')}</td>"
                   f"<td>{esc(p.cr.direction)}</td><td class=\"n\">{esc(p.cr.replicate)}</td>"
                   f"<td>{esc(p.outcome)}</td></tr>" for p in pairs)
    table = ("<table><thead><tr><th>cell</th><th>direction</th><th>replicate</th><th>outcome</th></tr></thead>"
             f"<tbody>{rows}</tbody></table>") if pairs else none("no resolved cell-replicate")
    hop_rows = "".join(f"<li>{link(f'{HOPS_DIR}/{hop_name(c, h)}', f'{c}: hop {h - 1} → {h}')}</li>" for c, h in hops)
    body = (f"<h1>Paired views</h1><h2>Cell-replicates ({len(pairs)})</h2>{table}"
            f"<h2>Chain hops ({len(hops)})</h2>" + (f"<ul>{hop_rows}</ul>" if hops else none("no chain hops")))
    return page("paired views", body, ctx.synthetic)
