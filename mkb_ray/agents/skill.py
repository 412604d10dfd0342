"""The instruction templates (mkb_ray/agents/templates/*.md) and SKILL.md hand-over.

All model-facing text of the agents lives in those files, so one hash covers it: `template_hash()` is stamped on
every attempt record, and bumping TEMPLATE_VERSION marks a deliberate change. Templates use `$name` placeholders
(string.Template), so code and braces in them need no escaping; a literal dollar is `$$`.
"""
from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path
from string import Template
from typing import Optional

TEMPLATE_VERSION = "3"  # 2: SKILL.md kept current (checkpoint, reminders); 3: SKILL.md turns by JSON schema
TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
# A SKILL.md larger than this is not a note but a dump; agents refuse it (the model is told).
SKILL_MAX_CHARS = 64_000

_SECTION = re.compile(r"^<!-- ([a-z_]+) -->\n", re.MULTILINE)


@functools.lru_cache(maxsize=None)
def load_template(name: str) -> str:
    """The text of templates/<name> (e.g. 'task.md')."""
    return (TEMPLATES_DIR / name).read_text(encoding="utf-8")


def render(name: str, /, **values: object) -> str:
    """templates/<name> with its $placeholders filled; a missing value is an error (KeyError names it)."""
    return Template(load_template(name)).substitute({k: str(v) for k, v in values.items()}).strip()


@functools.lru_cache(maxsize=None)
def load_sections(name: str) -> dict[str, str]:
    """A template file of named snippets, each introduced by a line `<!-- name -->`."""
    text = load_template(name)
    parts = _SECTION.split(text)
    return {parts[i]: parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}


def render_section(name: str, section: str, /, **values: object) -> str:
    return Template(load_sections(name)[section]).substitute({k: str(v) for k, v in values.items()})


def template_hash() -> str:
    """sha256 over TEMPLATE_VERSION and every template file (name and content), in name order."""
    digest = hashlib.sha256(f"version={TEMPLATE_VERSION}\n".encode())
    for path in sorted(TEMPLATES_DIR.glob("*.md")):
        digest.update(f"\n--- {path.name}\n".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def skill_instructions() -> str:
    return render("skill_instructions.md")


def read_source_skill(path: Path) -> str:
    """The source SKILL.md of a skill attempt, as text ('' when empty or blank: such an attempt is skipped).
    Undecodable bytes are replaced rather than refused: the source is handed on whatever it holds."""
    return path.read_bytes().decode("utf-8", "replace").strip()


def skill_section(source_skill: str) -> Optional[str]:
    """The fixed header plus the source SKILL.md, or None when there is nothing to hand on."""
    if not source_skill.strip():
        return None
    return render("skill_header.md", source_skill=source_skill.strip())
