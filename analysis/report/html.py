"""The report's one way of writing HTML: Jinja2 templates (templates/*.j2) rendered with autoescaping on.

Everything a run holds — ids, model output, kernels, SKILL.md text, claim categories, reasons — reaches a page
only through a template's `{{ … }}`, which escapes it: a `<script>` in a transcript is shown as text and a quote
in a category cannot end an attribute. The Python modules beside this one gather data; none of them writes markup
or escapes anything by hand. What a template renders is `Markup` (already escaped), so a block rendered by one
macro can be handed to another template; any plain `str` that meets it is escaped, never trusted.

The environment is built once per process (`environment`, cached) and inherited by the process that writes trial
pages in parallel (render.py forks it): templates are compiled once, not once per page.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from jinja2.environment import TemplateModule
from markupsafe import Markup

from .views import DASH

TEMPLATES = Path(__file__).parent / "templates"


def _shown(value: Any) -> Any:
    """What `{{ value }}` prints: None as nothing (a chain hop has no replicate), anything else as itself."""
    return "" if value is None else value


def num(value: Optional[float], digits: int = 3) -> str:
    """The `num` filter: a measurement to `digits` places, '–' when there is none."""
    return DASH if value is None else f"{value:.{digits}f}"


def flag(value: Optional[bool]) -> str:
    """The `flag` filter: yes / no, '–' when unknown."""
    return DASH if value is None else ("yes" if value else "no")


@lru_cache(maxsize=1)
def environment() -> Environment:
    """The report's template environment: autoescaping on for every template whatever its name (a `.j2` suffix
    would defeat `select_autoescape`), and an undefined name an error rather than an empty string."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, finalize=_shown,
                      auto_reload=False)
    env.filters.update(num=num, flag=flag)
    return env


def render(template: str, **context: Any) -> str:
    """A whole page (or file) from `template` with `context`."""
    return environment().get_template(template).render(**context)


def macros(template: str = "blocks.html.j2") -> TemplateModule:
    """The macros of `template` (blocks.html.j2: tables, links, notes, plots) for pages put together in Python;
    each returns escaped `Markup`."""
    return environment().get_template(template).module


def own_svg(svg: Optional[str]) -> Optional[Markup]:
    """An SVG figure this report drew (matplotlib, from our own tables) as markup to inline; None stays None.
    Only for figures we draw: matplotlib writes every label it draws as escaped text or an escaped comment."""
    return None if svg is None else Markup(svg)
