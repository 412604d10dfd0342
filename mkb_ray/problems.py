"""The problem registry: find, validate and describe problems under a problems root.

A problem is `<root>/<family>/NN_name.py` (MetaKernelBench contract) with our sidecar `NN_name.toml` and
solutions in `<root>/<family>/solutions/NN_name.<variant>.py`. Loading never imports the problem (that happens
only in the judging worker): the file is parsed for its docstring and the two entry points, so one malformed
problem is reported with its path and what is missing, and the rest still load.
"""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

FAMILIES = ("attention", "kv_cache", "mlp_norm", "moe", "quantization", "linear_attention")
# Solution variants: (dsl, target). File suffix -> variant.
SOLUTION_VARIANTS = {"cutedsl": ("cutedsl", "gpu"), "tirx": ("tirx", "gpu"), "tirx_cpu": ("tirx", "cpu")}


class ToleranceOverride(BaseModel):
    model_config = ConfigDict(extra="forbid")
    factor: float = Field(3.0, gt=0)
    min_abs: float = Field(0.0, ge=0)
    elementwise_outputs: list[int] = Field(default_factory=list, description="outputs compared per element")


class Sidecar(BaseModel):
    """Our metadata beside a problem file (`NN_name.toml`); see problems/AUTHORING.md."""

    model_config = ConfigDict(extra="forbid")
    family: Literal["attention", "kv_cache", "mlp_norm", "moe", "quantization", "linear_attention"]
    min_arch: Literal["sm_90a", "sm_100a"] = "sm_90a"
    mutates: list[int] = Field(default_factory=list)
    outlier_inputs: list[int] = Field(default_factory=list)
    outlier_scale: float = Field(16.0, gt=0)
    flops: Optional[str] = None
    bytes: Optional[str] = None
    smoke: dict[str, int] = Field(default_factory=dict)
    tolerance: ToleranceOverride = Field(default_factory=ToleranceOverride)


class ProblemError(BaseModel):
    path: str
    message: str


class Problem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    problem_id: str = Field(description="<family>/<NN_name>")
    path: Path
    description: str
    sidecar: Sidecar
    solutions: dict[str, Path] = Field(default_factory=dict, description="variant suffix -> solution file")

    @property
    def family(self) -> str:
        return self.sidecar.family


class ProblemSet(BaseModel):
    root: Path
    problems: list[Problem]
    errors: list[ProblemError]

    def get(self, problem_id: str) -> Problem:
        for problem in self.problems:
            if problem.problem_id == problem_id:
                return problem
        known = ", ".join(p.problem_id for p in self.problems[:8])
        raise KeyError(f"no problem '{problem_id}' under {self.root} (known: {known}{', ...' if len(self.problems) > 8 else ''})")


def default_root() -> Path:
    """The problems shipped with this checkout."""
    return Path(__file__).resolve().parent.parent / "problems"


def _parse_problem_file(path: Path) -> str:
    """The task description; raises ValueError naming what the MetaKernelBench contract misses."""
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except SyntaxError as err:
        raise ValueError(f"syntax error at line {err.lineno}: {err.msg}") from None
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    missing = [name for name in ("reference", "make_inputs") if name not in functions]
    if missing:
        raise ValueError(f"missing {', '.join(repr(m + '()') for m in missing)} (MetaKernelBench problem contract)")
    docstring = ast.get_docstring(tree)
    if not docstring:
        raise ValueError("missing the one-line module docstring (the task description)")
    return docstring.strip().splitlines()[0]


def _load_sidecar(problem_path: Path, family_dir: str) -> Sidecar:
    side = problem_path.with_suffix(".toml")
    if not side.exists():
        # An MKB checkout has no sidecars: the family folder is all we know.
        if family_dir not in FAMILIES:
            raise ValueError(f"no sidecar {side.name} and folder '{family_dir}' is not a known family")
        return Sidecar(family=family_dir)  # type: ignore[arg-type]
    try:
        data = tomllib.loads(side.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{side.name}: invalid TOML: {err}") from None
    try:
        return Sidecar(**data)
    except ValidationError as err:
        fields = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors())
        raise ValueError(f"{side.name}: {fields}") from None


def load_problems(root: Path | None = None) -> ProblemSet:
    root = (root or default_root()).resolve()
    problems: list[Problem] = []
    errors: list[ProblemError] = []
    if not root.is_dir():
        raise FileNotFoundError(f"problems root {root} is not a directory")
    for path in sorted(root.glob("*/*.py")):
        if path.name.startswith("_"):
            continue
        family_dir = path.parent.name
        try:
            description = _parse_problem_file(path)
            sidecar = _load_sidecar(path, family_dir)
        except (ValueError, OSError) as err:
            errors.append(ProblemError(path=str(path), message=str(err)))
            continue
        solutions = {}
        for suffix in SOLUTION_VARIANTS:
            candidate = path.parent / "solutions" / f"{path.stem}.{suffix}.py"
            if candidate.exists():
                solutions[suffix] = candidate
        problems.append(Problem(problem_id=f"{family_dir}/{path.stem}", path=path, description=description,
                                sidecar=sidecar, solutions=solutions))
    return ProblemSet(root=root, problems=problems, errors=errors)
