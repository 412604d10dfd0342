"""The problem registry: find, validate and describe problems under a problems root.

A problem is `<root>/<family>/NN_name.py` (MetaKernelBench contract) with our sidecar `NN_name.toml` and
solutions in `<root>/<family>/solutions/NN_name.<variant>.py`. Loading never imports the problem (that happens
only in the judging worker): the file is parsed for its docstring and the two entry points, so one malformed
problem is reported with its path and what is missing, and the rest still load.
"""
from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .problem_source import ExpressionError, arch_hint, cuda_pins, evaluate_work, shape_constants

DEFAULT_ARCH = "sm_90a"
FAMILIES = ("attention", "kv_cache", "mlp_norm", "moe", "quantization", "linear_attention")
# Solution variants: (dsl, target). File suffix -> variant.
SOLUTION_VARIANTS = {"cutedsl": ("cutedsl", "gpu"), "tirx": ("tirx", "gpu"), "tirx_cpu": ("tirx", "cpu")}


class ToleranceOverride(BaseModel):
    model_config = ConfigDict(extra="forbid")
    factor: float = Field(3.0, gt=0)
    min_abs: float = Field(0.0, ge=0)
    elementwise_outputs: list[int] = Field(default_factory=list, description="outputs compared per element")


class ClosureProbe(BaseModel):
    """One tempting but false closure a skill might assert about the problem, and the verified solution that
    refutes it: the lineage analysis looks for such claims in real skills and follows them along chains."""

    model_config = ConfigDict(extra="forbid")
    claim: str = Field(min_length=10, description="the closure, as a skill would word it")
    refuted_by: str = Field(min_length=10, description="which shipped solution does it, and how")


class Sidecar(BaseModel):
    """Our metadata beside a problem file (`NN_name.toml`); see problems/AUTHORING.md."""

    model_config = ConfigDict(extra="forbid")
    family: Literal["attention", "kv_cache", "mlp_norm", "moe", "quantization", "linear_attention"]
    min_arch: Optional[Literal["sm_90a", "sm_100a"]] = Field(
        None, description="unset: inferred from the problem file, else sm_90a (see Problem.min_arch)")
    mutates: list[int] = Field(default_factory=list)
    outlier_inputs: list[int] = Field(default_factory=list)
    outlier_scale: float = Field(16.0, gt=0)
    flops: Optional[str] = Field(None, description="arithmetic over the shape constants: the work, for the roofline")
    bytes: Optional[str] = Field(None, description="arithmetic over the shape constants: bytes read plus written")
    flops_kind: Literal["bf16_tensor", "fp8_tensor", "int8_tensor", "fp32"] = Field(
        "bf16_tensor", description="which compute peak the flops are read against")
    smoke: dict[str, int] = Field(default_factory=dict)
    tolerance: ToleranceOverride = Field(default_factory=ToleranceOverride)
    closure_probe: Optional[ClosureProbe] = None


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
    min_arch: Literal["sm_90a", "sm_100a"] = DEFAULT_ARCH
    min_arch_source: str = Field("default", description="'sidecar', 'default', or what in the file implied it")
    cuda_pins: list[int] = Field(default_factory=list, description="lines where make_inputs() pins tensors to CUDA")
    shapes: dict[str, int] = Field(default_factory=dict, description="the file's shape constants (production)")

    @property
    def family(self) -> str:
        return self.sidecar.family

    @property
    def min_arch_inferred(self) -> bool:
        """min_arch was read from the problem file (no sidecar set it)."""
        return self.min_arch_source.startswith("inferred")

    def judging_refusal(self, device: str, gpu_arch: Optional[str]) -> Optional[str]:
        """Why this problem cannot be judged on `device` here (None: it can). gpu_arch: this machine's GPU
        (e.g. 'sm_90a'), None without one. Refusing costs nobody a submission; a judgement would fail instead."""
        if self.cuda_pins and gpu_arch is None:
            lines = ", ".join(str(n) for n in self.cuda_pins)
            return (f"{self.path}: make_inputs() puts its tensors on CUDA (line {lines}), and this machine has no "
                    f"GPU, so the problem cannot be judged here, not even compile-only (compiling happens in the "
                    f"first call, on real inputs). Create the tensors without device= (the judge sets the default "
                    f"device: problems/AUTHORING.md) or judge it on a GPU.")
        if device == "cuda" and gpu_arch is not None and _arch_number(gpu_arch) < _arch_number(self.min_arch):
            return (f"{self.path}: written for {self.min_arch} ({self.min_arch_source}); this GPU is {gpu_arch}, "
                    f"which cannot run it. Judge it on a GPU of {self.min_arch} or newer.")
        return None


def _arch_number(arch: str) -> int:
    return int("".join(ch for ch in arch if ch.isdigit()))


class ProblemSet(BaseModel):
    root: Path
    problems: list[Problem]
    errors: list[ProblemError]

    def get(self, problem_id: str) -> Problem:
        for problem in self.problems:
            if problem.problem_id == problem_id:
                return problem
        for error in self.errors:  # a malformed problem: say what is wrong with it, not that it does not exist
            path = Path(error.path)
            if f"{path.parent.name}/{path.stem}" == problem_id:
                raise KeyError(f"problem '{problem_id}' is malformed: {error.path}: {error.message}")
        known = ", ".join(p.problem_id for p in self.problems[:8])
        more = ", ..." if len(self.problems) > 8 else ""
        raise KeyError(f"no problem '{problem_id}' under {self.root} (known: {known}{more})")


def default_root() -> Path:
    """The problems shipped with this checkout."""
    return Path(__file__).resolve().parent.parent / "problems"


@dataclass(frozen=True)
class _ParsedProblem:
    description: str
    tree: ast.Module
    source: str


def _parse_problem_file(path: Path) -> _ParsedProblem:
    """The task description and syntax tree; raises ValueError naming what the MetaKernelBench contract misses."""
    source = path.read_text()
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as err:
        raise ValueError(f"syntax error at line {err.lineno}: {err.msg}") from None
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    missing = [name for name in ("reference", "make_inputs") if name not in functions]
    if missing:
        raise ValueError(f"missing {', '.join(repr(m + '()') for m in missing)} (MetaKernelBench problem contract)")
    docstring = ast.get_docstring(tree)
    if not docstring:
        raise ValueError("missing the one-line module docstring (the task description)")
    return _ParsedProblem(docstring.strip().splitlines()[0], tree, source)


def _check_work(sidecar: Sidecar, shapes: dict[str, int], path: Path) -> None:
    """flops and bytes must evaluate at both presets (bytes positive; flops 0 for a pure copy): the roofline of
    every verdict uses them."""
    for preset, values in (("production", shapes), ("smoke", {**shapes, **sidecar.smoke})):
        for name in ("flops", "bytes"):
            expression = getattr(sidecar, name)
            if expression is None:
                continue
            try:
                value = evaluate_work(expression, values)
            except ExpressionError as err:
                raise ValueError(f"{path.with_suffix('.toml').name}: {name}: {err}") from None
            if value < 0 or (name == "bytes" and value == 0):
                raise ValueError(f"{path.with_suffix('.toml').name}: {name}: '{expression}' is {value:g} at "
                                 f"{preset} shapes (bytes must be positive, flops not negative)")


def _min_arch(sidecar: Sidecar, parsed: _ParsedProblem) -> tuple[str, str]:
    """(arch, where it came from): the sidecar's, else what the file implies, else sm_90a."""
    if sidecar.min_arch is not None:
        return sidecar.min_arch, "sidecar"
    hint = arch_hint(parsed.tree, parsed.source)
    if hint is not None:
        return hint.arch, f"inferred: line {hint.line} {hint.why}"
    return DEFAULT_ARCH, "default"


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
            parsed = _parse_problem_file(path)
            sidecar = _load_sidecar(path, family_dir)
            shapes = shape_constants(parsed.tree)
            _check_work(sidecar, shapes, path)
        except (ValueError, OSError) as err:  # UnicodeDecodeError is a ValueError
            errors.append(ProblemError(path=str(path), message=str(err)))
            continue
        min_arch, arch_source = _min_arch(sidecar, parsed)
        solutions = {}
        for suffix in SOLUTION_VARIANTS:
            candidate = path.parent / "solutions" / f"{path.stem}.{suffix}.py"
            if candidate.exists():
                solutions[suffix] = candidate
        problems.append(Problem(problem_id=f"{family_dir}/{path.stem}", path=path, description=parsed.description,
                                sidecar=sidecar, solutions=solutions, min_arch=min_arch, min_arch_source=arch_source,
                                cuda_pins=cuda_pins(parsed.tree), shapes=shapes))
    return ProblemSet(root=root, problems=problems, errors=errors)
