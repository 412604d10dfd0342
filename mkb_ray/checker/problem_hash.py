"""The problem hash: sha256 over a problem file and its TOML sidecar — what a verdict was judged against, and
what a planned trial and its record carry.

Standard library only, and kept apart from `problem_loader` (which imports torch through `correctness`), so the
planner and the parent side can hash problems without paying for torch.
"""
from __future__ import annotations

import hashlib
from pathlib import Path


def sidecar_path(problem_path: Path) -> Path:
    """The TOML sidecar beside a problem file (it may not exist)."""
    return problem_path.with_suffix(".toml")


def problem_hash(problem_path: Path) -> str:
    """sha256 over the problem file and its sidecar: what a verdict was judged against."""
    digest = hashlib.sha256(problem_path.read_bytes())
    side = sidecar_path(problem_path)
    if side.exists():
        digest.update(side.read_bytes())
    return digest.hexdigest()
