"""What a report table is, apart from where it is shown: the analysis frame (written as CSV and parquet as it
came), the columns a reader sees (formatted once, for the HTML page and the Markdown file alike) and, per row, the
trials it aggregates (for the drill-down list a row links to).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import polars as pl

Row = dict[str, Any]
DASH = "–"


@dataclass(frozen=True)
class Column:
    """One shown column: its header and how a frame row turns into its text."""

    header: str
    cell: Callable[[Row], str]
    numeric: bool = True


@dataclass(frozen=True)
class Members:
    """What one table row aggregates: cell-replicates (benchmark tables; `CellReplicate`s) or plain trial ids
    (lineage tables). `title` heads the list page it links to."""

    title: str
    cells: tuple[Any, ...] = ()
    trial_ids: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.cells and not self.trial_ids

    @property
    def n_trials(self) -> int:
        ids = set(self.trial_ids)
        for cr in self.cells:
            ids.update(a.trial_id for a in (cr.source, cr.base, cr.skill) if a is not None)
        return len(ids)


@dataclass
class TableView:
    """A report table. `name` is the file stem under tables/ (and the list pages' prefix); `members[i]` is what
    row i aggregates (None: nothing to list)."""

    name: str
    title: str
    frame: pl.DataFrame
    columns: Sequence[Column]
    members: list[Optional[Members]] = field(default_factory=list)
    note: str = ""

    @property
    def rows(self) -> list[Row]:
        return self.frame.to_dicts()

    def cells(self) -> list[list[str]]:
        return [[c.cell(row) for c in self.columns] for row in self.rows]


# -- number formats (one place, so the page and tables.md agree) ------------------------------------------------
def _tidy(value: float, digits: int) -> float:
    return round(value, digits) + 0.0   # + 0.0: a value that rounds to -0 reads 0


def num(value: Optional[float], digits: int = 3) -> str:
    return DASH if value is None else f"{_tidy(value, digits):.{digits}f}"


def signed(value: Optional[float], digits: int = 3) -> str:
    return DASH if value is None else f"{_tidy(value, digits):+.{digits}f}"


def interval(lo: Optional[float], hi: Optional[float], digits: int = 3) -> str:
    return "" if lo is None or hi is None else f" [{lo:.{digits}f}, {hi:.{digits}f}]"


def text(key: str) -> Callable[[Row], str]:
    return lambda row: DASH if row.get(key) is None else str(row[key])


def number(key: str, digits: int = 3, ci: bool = False, sign: bool = False) -> Callable[[Row], str]:
    """`row[key]` formatted, with `[key_lo, key_hi]` appended when `ci` and both bounds are there."""
    show = signed if sign else num

    def cell(row: Row) -> str:
        out = show(row.get(key), digits)
        return out + interval(row.get(f"{key}_lo"), row.get(f"{key}_hi"), digits) if ci else out
    return cell


def integer(key: str) -> Callable[[Row], str]:
    return lambda row: DASH if row.get(key) is None else f"{int(row[key]):d}"
