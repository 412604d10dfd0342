"""Load one problem (MetaKernelBench file + our TOML sidecar) inside the worker, with a shape preset applied.

Stdlib-only parsing (tomllib), so the worker stays free of pydantic; the parent validates the same sidecar with
its own typed model (`mkb_ray.problems`) before a request is ever sent.
"""
from __future__ import annotations

import importlib.util
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from .correctness import Tolerance
# problem_hash lives in a torch-free module (the planner imports it); callers may import it from here too.
from .problem_hash import problem_hash, sidecar_path


@dataclass
class LoadedProblem:
    """A problem module ready to draw inputs from, plus the sidecar fields the judge uses."""

    problem_id: str
    module: ModuleType
    sidecar: dict[str, Any]
    preset: str  # what was applied: production, smoke (the sidecar's) or smoke_derived (see derive_smoke)
    shapes: dict[str, int]
    problem_hash: str
    mutates: list[int] = field(default_factory=list)
    outlier_inputs: list[int] = field(default_factory=list)
    outlier_scale: float = 16.0
    tolerance: Tolerance = field(default_factory=Tolerance)
    overrides: dict[str, int] = field(default_factory=dict)  # the shape constants the preset changed

    @property
    def reference(self) -> Callable[..., Any]:
        return self.module.reference

    @property
    def make_inputs(self) -> Callable[[], list[Any]]:
        return self.module.make_inputs

    def draw(self, seed: int, outlier: bool = False, device_type: str = "cpu") -> list[Any]:
        """The inputs of draw `seed` (an outlier draw scales the sidecar's `outlier_inputs`): how the judge draws,
        and how a benchmark must draw to see what the judge sees."""
        import torch

        torch.manual_seed(seed)
        with torch.device(device_type):
            inputs = list(self.make_inputs())
        if outlier:
            for index in self.outlier_inputs:
                inputs[index] = inputs[index] * self.outlier_scale
        return inputs


def _import_path(path: Path, module_name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: cannot be imported as a module")
    module = importlib.util.module_from_spec(spec)
    # Registered like any imported module: torch.compile (the baseline) re-imports the functions it traces.
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


# A derived smoke preset halves each shape constant until it is at most this (or odd).
DERIVED_SMOKE_MAX = 64


def derive_smoke(module: ModuleType) -> dict[str, int]:
    """Smoke shapes for a problem without a [smoke] table (a MetaKernelBench file): every even integer UPPERCASE
    constant above DERIVED_SMOKE_MAX is halved until it is at most that or odd, so divisibility by powers of two
    survives. Whether the problem still works at those shapes is tried by the caller."""
    derived = {}
    for name, value in vars(module).items():
        if not name.isupper() or isinstance(value, bool) or not isinstance(value, int):
            continue
        small = value
        while small > DERIVED_SMOKE_MAX and small % 2 == 0:
            small //= 2
        if small != value:
            derived[name] = small
    return derived


def _works_at(module: ModuleType, overrides: dict[str, int]) -> bool:
    """Set `overrides` on the module and run make_inputs() and reference() once; on failure restore the defaults."""
    defaults = {name: getattr(module, name) for name in overrides}
    for name, value in overrides.items():
        setattr(module, name, value)
    try:
        module.reference(*module.make_inputs())
        return True
    except Exception:  # noqa: BLE001 - any failure means these shapes do not fit the problem's own relations
        for name, value in defaults.items():
            setattr(module, name, value)
        return False


def load_problem(problem_path: Path, problem_id: str, preset: str) -> LoadedProblem:
    """Import the problem file and apply the shape preset ('production' = file defaults, 'smoke' = sidecar). A
    smoke request for a problem without a [smoke] table gets derived shapes where the problem works at them
    (preset 'smoke_derived'), else production shapes — and the preset says which, never 'smoke'."""
    module = _import_path(problem_path, "mkb_problem")
    for name in ("reference", "make_inputs"):
        if not callable(getattr(module, name, None)):
            raise ValueError(f"{problem_path}: missing '{name}()' (MetaKernelBench problem contract)")
    side = sidecar_path(problem_path)
    sidecar: dict[str, Any] = tomllib.loads(side.read_text()) if side.exists() else {}
    overrides: dict[str, int] = {}
    if preset == "smoke" and sidecar.get("smoke"):
        overrides = dict(sidecar["smoke"])
        for name, value in overrides.items():
            if not hasattr(module, name):
                raise ValueError(f"{side}: [smoke] sets '{name}', which {problem_path.name} does not define")
            setattr(module, name, value)
    elif preset == "smoke":
        overrides = derive_smoke(module)
        if overrides and _works_at(module, overrides):
            preset = "smoke_derived"
        else:
            overrides, preset = {}, "production"
    elif preset != "production":
        raise ValueError(f"unknown shape preset '{preset}' (use 'production' or 'smoke')")
    shapes = {k: v for k, v in vars(module).items() if k.isupper() and isinstance(v, (int, float))}
    tolerance = sidecar.get("tolerance", {})
    return LoadedProblem(
        problem_id=problem_id,
        module=module,
        sidecar=sidecar,
        preset=preset,
        shapes=shapes,
        problem_hash=problem_hash(problem_path),
        mutates=list(sidecar.get("mutates", [])),
        outlier_inputs=list(sidecar.get("outlier_inputs", [])),
        outlier_scale=float(sidecar.get("outlier_scale", 16.0)),
        tolerance=Tolerance(float(tolerance.get("factor", 3.0)), float(tolerance.get("min_abs", 0.0)),
                            tuple(int(i) for i in tolerance.get("elementwise_outputs", ()))),
        overrides=overrides,
    )
