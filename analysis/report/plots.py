"""The report's own figure — ΔGM per problem as horizontal bars, one colour per direction, with the bootstrap
interval as error bars — as SVG text for inlining, and the inlining of SVG files the lineage plots wrote.

Drawn on a matplotlib Figure with the Agg canvas (pyplot's global state is never touched); deterministic output
(fixed SVG hash salt, no date in the metadata), as in `lineage_plots`.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Optional

import polars as pl

_RC = {"svg.hashsalt": "mkb-ray-report", "svg.fonttype": "path", "font.size": 9}
DIRECTION_COLOURS = {"cutedsl2tirx": "#4c72b0", "tirx2cutedsl": "#dd8452"}


def problem_lift_svg(frame: pl.DataFrame) -> Optional[str]:
    """Bars of `dgm` per (problem_id, direction) of the per-problem lift table; None when no bar has a value."""
    rows = [r for r in frame.iter_rows(named=True) if r.get("dgm") is not None]
    if not rows:
        return None
    from matplotlib import rc_context
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    problems = sorted({r["problem_id"] for r in rows})
    directions = sorted({r["direction"] for r in rows})
    height = 0.8 / max(1, len(directions))
    with rc_context(_RC):
        fig = Figure(figsize=(7.5, min(40.0, max(2.5, 0.3 * len(problems) * len(directions) + 1.2))))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        for r in rows:
            offset = directions.index(r["direction"]) - (len(directions) - 1) / 2
            y = problems.index(r["problem_id"]) + offset * height
            lo, hi = r.get("dgm_lo"), r.get("dgm_hi")
            # max(0, …): a one-problem interval is the estimate itself, recomputed with rounding on either side
            err = [[max(0.0, r["dgm"] - lo)], [max(0.0, hi - r["dgm"])]] if lo is not None and hi is not None \
                else None
            ax.barh(y, r["dgm"], height=height * 0.9, xerr=err, capsize=2, ecolor="#333333",
                    color=DIRECTION_COLOURS.get(r["direction"], "#8c8c8c"))
        ax.axvline(0.0, color="#333333", linewidth=0.8)
        ax.set_yticks(range(len(problems)), problems)
        ax.invert_yaxis()
        ax.set_xlabel("ΔGM paired lift (skill vs base; 0 = no change)")
        ax.set_title("Per-problem lift")
        ax.grid(axis="x", alpha=0.3)
        ax.legend(handles=[Patch(color=DIRECTION_COLOURS.get(d, "#8c8c8c"), label=d) for d in directions],
                  loc="lower right", fontsize=7)
        fig.tight_layout()
        out = io.StringIO()
        fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    return strip_prologue(out.getvalue())


def strip_prologue(svg: str) -> str:
    """The `<svg ...>` element alone (the XML declaration and DOCTYPE may not appear inside an HTML body)."""
    at = svg.find("<svg")
    return svg[at:] if at >= 0 else ""


def inline_svg(path: Optional[Path]) -> Optional[str]:
    """The SVG file's element for inlining; None for no file (a plot that was not drawn)."""
    if path is None or not path.is_file():
        return None
    return strip_prologue(path.read_text(encoding="utf-8")) or None
