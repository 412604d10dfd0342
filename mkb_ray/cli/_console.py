"""The rich console every `mkb` command prints through."""
from __future__ import annotations

from typing import Any


def make_console() -> Any:
    """A rich Console; piped output (logs, CI, `| tee`) would get rich's 80-column default, which truncates
    problem and trial ids, so it is widened to 160 columns there."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=160)
