"""The README is a front door: two commands at the top, at most 120 lines, and every page it sends a reader to
exists (links between the docs pages too)."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")


def _pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_the_readme_opens_with_exactly_two_commands_and_stays_short() -> None:
    text = (REPO / "README.md").read_text()
    first_block = text.split("```")[1]
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["make run", "make test"]
    assert len(text.splitlines()) <= 120


def test_every_relative_link_and_anchor_resolves() -> None:
    broken = []
    for page in _pages():
        for target, anchor in LINK.findall(page.read_text()):
            if target.startswith(("http://", "https://")):
                continue
            path = (page.parent / target).resolve()
            if not path.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and path.suffix == ".md":
                slugs = {re.sub(r"[^\w\- ]", "", h.lower()).strip().replace(" ", "-")
                         for h in re.findall(r"^#+ (.+)$", path.read_text(), flags=re.M)}
                if anchor[1:] not in slugs:
                    broken.append(f"{page.name}: {target}{anchor}")
    assert not broken, broken


def test_the_readme_reaches_every_docs_page() -> None:
    linked = {Path(t).name for t, _ in LINK.findall((REPO / "README.md").read_text()) if t.startswith("docs/")}
    assert {p.name for p in (REPO / "docs").glob("*.md")} <= linked
