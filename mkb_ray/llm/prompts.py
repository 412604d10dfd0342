"""Versioned prompt templates pinned by their sha256: a released prompt never changes under its version name, so
a judge or annotator name such as `llm:<model>:v1` always means the same words."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Mapping


class PromptError(ValueError):
    """An unknown prompt version, or a template whose text no longer matches its pinned hash."""


def load_pinned_prompt(folder: Path, stem: str, version: str, pins: Mapping[str, str], what: str) -> str:
    """The text of `folder/<stem>-<version>.md`, refused unless `pins[version]` is its sha256. `what` names the
    prompt in errors ("annotation", "attribution")."""
    path = folder / f"{stem}-{version}.md"
    if version not in pins or not path.is_file():
        raise PromptError(f"no {what} prompt {version!r} (known: {', '.join(sorted(pins))})")
    text = path.read_text(encoding="utf-8")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if digest != pins[version]:
        raise PromptError(f"{path} changed (sha256 {digest}, released as {pins[version]}): a prompt is fixed once "
                          f"released; write {stem}-<new version>.md instead")
    return text
