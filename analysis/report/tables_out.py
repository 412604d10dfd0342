"""Every report table as files under DIR/tables/: `<name>.csv` and `<name>.parquet` (the analysis frame as it
came) and all of them in `tables.md` as paper-style Markdown (the columns the page shows, formatted alike)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .views import TableView

TABLES_DIR = "tables"


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown_table(view: TableView) -> str:
    """One table as GitHub/paper-style Markdown: a heading, the note, header and aligned columns."""
    lines = [f"## {view.title}", ""]
    if view.note:
        lines += [view.note, ""]
    if view.frame.is_empty():
        return "\n".join(lines + ["none", ""])
    lines.append("| " + " | ".join(_md_cell(c.header) for c in view.columns) + " |")
    lines.append("|" + "|".join("---:" if c.numeric else ":---" for c in view.columns) + "|")
    for cells in view.cells():
        lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
    return "\n".join(lines + [""])


def write_tables(views: Sequence[TableView], out_dir: Path, run_name: str, synthetic: bool) -> list[Path]:
    """Write each view's CSV and parquet and the combined tables.md; returns the paths written."""
    folder = Path(out_dir) / TABLES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for view in views:
        csv, parquet = folder / f"{view.name}.csv", folder / f"{view.name}.parquet"
        view.frame.write_csv(csv)
        view.frame.write_parquet(parquet)
        written += [csv, parquet]
    head = [f"# Tables of run {run_name}", ""]
    if synthetic:
        head += ["**SYNTHETIC run: models and judges were replaced by calibrated random draws; no number here is a "
                 "measurement.**", ""]
    md = folder / "tables.md"
    md.write_text("\n".join(head) + "\n".join(markdown_table(v) for v in views), encoding="utf-8")
    return written + [md]
