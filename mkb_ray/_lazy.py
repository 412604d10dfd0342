"""Lazy public names for import-light packages (standard library only: the judging worker imports mkb_ray)."""
from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` that imports `exports[name]` (a module path) only when `name` is first used."""
    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        raise AttributeError(f"module '{package}' has no attribute '{name}'")
    return __getattr__
