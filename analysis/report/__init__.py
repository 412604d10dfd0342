"""`mkb report`: a self-contained static HTML report of a run store (index.html with every single-hop and lineage
table, per-trial drill-down pages, tables as CSV / parquet / Markdown). No JavaScript, nothing fetched; works from
file://. The metrics come from the analysis modules; this package only gathers and shows them.

    from mkb_ray.analysis.report import render_report
    summary = render_report(Path("runs/quickstart"), Path("runs/quickstart/report"))

Modules, one job each: `trials` (the run's trials, submissions and artifact names, batched), `data` (the
benchmark tables), `lineage` (claims, annotations, edges, the propagation table and plots), `views` (what a table
is), `plots` (the ΔGM bar plot), `html` (the Jinja2 environment: every page comes from templates/*.j2 with
autoescaping on, so no module here writes markup or escapes by hand), `context` (what the drill-down pages read),
`skill_view` (a SKILL.md with its claims coloured), `transcript`, `pages` (trial and list pages), `pair_pages`
(paired views), `index_page`, `tables_out` (CSV / parquet / Markdown), `render` (the orchestration).
"""
from __future__ import annotations

from mkb_ray._lazy import lazy_exports

_EXPORTS = {"render_report": "mkb_ray.analysis.report.render", "ReportOptions": "mkb_ray.analysis.report.render",
            "ReportSummary": "mkb_ray.analysis.report.render"}
__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
