"""Page building blocks of the report: the inline style sheet, the page shell (with the SYNTHETIC banner), tables,
sections and the index page. Plain string templates; no JavaScript, nothing loaded from anywhere.

Everything that came from a run — ids, model output, kernels, SKILL.md text, reasons — goes through `esc` before
it reaches a page: a `<script>` in a transcript is shown as text.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Optional, Sequence

from .views import TableView

CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1400px;padding:0 1.2em 3em;
color:#1b1b1b;background:#fff}
h1{font-size:1.5em;margin:.6em 0 .2em}h2{font-size:1.2em;margin:1.6em 0 .4em;border-bottom:1px solid #ddd}
h3{font-size:1.05em;margin:1.2em 0 .3em}
nav{padding:.5em 0;border-bottom:1px solid #eee;font-size:.9em}nav a{margin-right:1em}
.synthetic{background:#b00020;color:#fff;font-weight:700;padding:.6em 1em;text-align:center;letter-spacing:.04em;
margin:0 -1.2em}
table{border-collapse:collapse;margin:.4em 0 .8em;font-size:.88em}
th,td{border:1px solid #ddd;padding:.2em .5em;vertical-align:top}th{background:#f4f4f4;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr:nth-child(even) td{background:#fafafa}
.note{color:#555;font-size:.85em;max-width:75em}.none{color:#777;font-style:italic}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:.1em 1em}dl.meta dt{font-weight:600}dl.meta dd{margin:0}
pre{background:#f7f7f7;border:1px solid #e3e3e3;padding:.6em;overflow-x:auto;white-space:pre-wrap;
word-break:break-word;font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.ev{border-left:3px solid #ccc;margin:.5em 0;padding:.1em .6em}.ev h4{margin:.2em 0;font-size:.9em;color:#444}
.ev.user{border-color:#4c72b0}.ev.assistant{border-color:#55a868}.ev.system{border-color:#8172b2}
.ev.tool{border-color:#dd8452}.ev.submission{border-color:#c44e52}.ev.other{border-color:#bbb}
.claim{border-radius:3px;padding:0 .1em}.lk{font-size:.8em;text-decoration:none;margin-left:.3em}
.legend span{display:inline-block;margin:.1em .4em .1em 0;padding:0 .4em;border-radius:3px}
.tier-pass,.tier-pass2x{color:#1a7f37;font-weight:600}.tier-fail{color:#b00020;font-weight:600}
.plot svg{max-width:100%;height:auto}
"""

SYNTHETIC_BANNER = ('<div class="synthetic" id="synthetic-banner">SYNTHETIC RUN — models and judges were replaced '
                    'by calibrated random draws; no number on this page is a measurement</div>')


def esc(value: object) -> str:
    """HTML-escaped text of anything (None as the empty string)."""
    return "" if value is None else html.escape(str(value), quote=True)


def page(title: str, body: str, synthetic: bool, root: str = "") -> str:
    """A whole page. `root` is the relative path from the page to the report root ('' or '../')."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f'<style>{CSS}</style></head><body>{SYNTHETIC_BANNER if synthetic else ""}'
            f'<nav><a href="{root}index.html">report index</a><a href="{root}trials.html">all trials</a></nav>\n'
            f'{body}\n</body></html>\n')


def none(what: str = "none") -> str:
    return f'<p class="none">{esc(what)}</p>'


def tier_span(tier: Optional[str]) -> str:
    return f'<span class="tier-{esc(tier)}">{esc(tier)}</span>' if tier else "–"


def link(href: Optional[str], label: str) -> str:
    """An escaped link (just the escaped label when there is no target)."""
    return f'<a href="{esc(href)}">{esc(label)}</a>' if href else esc(label)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool] = ()) -> str:
    """A table of already-escaped cell HTML."""
    num = list(numeric) + [False] * (len(headers) - len(numeric))
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td class="n">{c}</td>' if num[i] else f"<td>{c}</td>"
                                    for i, c in enumerate(r)) + "</tr>\n" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>"


def view_table(view: TableView, row_links: Sequence[Optional[str]]) -> str:
    """A TableView with a last column linking each row to the list of the trials it aggregates."""
    if view.frame.is_empty():
        return none("none (no rows)")
    rows = []
    for i, cells in enumerate(view.cells()):
        members = view.members[i] if i < len(view.members) else None
        href = row_links[i] if i < len(row_links) else None
        trials = link(href, f"{members.n_trials} trials") if members is not None and not members.empty else "–"
        rows.append([esc(c) for c in cells] + [trials])
    return table([c.header for c in view.columns] + ["trials"], rows, [c.numeric for c in view.columns] + [True])


def section(anchor: str, title: str, content: str) -> str:
    return f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>\n{content}\n</section>'


def view_block(view: TableView, row_links: Sequence[Optional[str]], heading: bool = True) -> str:
    """A table with its title (h3) and note, and the file names it was also written as."""
    parts = [f'<h3 id="table-{esc(view.name)}">{esc(view.title)}</h3>'] if heading else []
    parts.append(view_table(view, row_links))
    if view.note:
        parts.append(f'<p class="note">{esc(view.note)} Also as <a href="tables/{esc(view.name)}.csv">CSV</a>, '
                     f'<a href="tables/{esc(view.name)}.parquet">parquet</a>.</p>')
    return "\n".join(parts)


def plot(svg: Optional[str], what: str) -> str:
    """An inline SVG figure, or 'none' when the figure is missing."""
    return f'<div class="plot">{svg}</div>' if svg else none(f"{what}: none")


@dataclass(frozen=True)
class RunHeader:
    """What the top of every page names."""

    name: str
    config_hash: Optional[str]
    targets: tuple[str, ...]
    synthetic: bool
    created_at: Optional[str]
    counts: tuple[tuple[str, int], ...]      # (kind/status label, trials)


def header_block(h: RunHeader) -> str:
    counts = ", ".join(f"{esc(k)} {n}" for k, n in h.counts) or "none"
    return (f"<h1>Run report: {esc(h.name)}</h1><dl class=\"meta\">"
            f"<dt>config hash</dt><dd><code>{esc(h.config_hash or 'unknown')}</code></dd>"
            f"<dt>target(s)</dt><dd>{esc(', '.join(h.targets) or 'none')}</dd>"
            f"<dt>synthetic</dt><dd>{'yes' if h.synthetic else 'no'}</dd>"
            f"<dt>store created</dt><dd>{esc(h.created_at or 'unknown')}</dd>"
            f"<dt>trials</dt><dd>{counts}</dd></dl>")


def contents(entries: Sequence[tuple[str, str]]) -> str:
    return "<p>" + " · ".join(f'<a href="#{esc(a)}">{esc(t)}</a>' for a, t in entries) + "</p>"
