"""What a problem file says about where it can be judged, read from its source without importing it.

Problem files written for MetaKernelBench carry no sidecar, and two of their habits decide where they can run:
- `make_inputs()` may pin its tensors to CUDA (`device="cuda"`, `.cuda()`, `.to("cuda")`). Such a problem cannot be
  judged on a machine without a GPU at all — not even compile-only, since compiling happens inside the first call,
  on real inputs. The registry records the lines, and the judge refuses with them instead of spending a submission
  on `Torch not compiled with CUDA enabled`.
- A problem written for Blackwell names it: an `ARCH`/`MIN_ARCH`-like constant, or sm_100-only features (tcgen05,
  nvfp4 / float4_e2m1). That is its minimum architecture unless a sidecar says otherwise.
A sidecar's `flops` and `bytes` are arithmetic over the shape constants; `evaluate_work` computes them without
running anything else.
"""
from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass
from typing import Mapping, Optional

ARCH_CONSTANTS = ("MIN_ARCH", "ARCH", "TARGET_ARCH", "SM_ARCH", "GPU_ARCH")
ARCH_VALUE = re.compile(r"^sm_?(\d{2,3})a?$", re.IGNORECASE)
# Words that only a Blackwell (sm_100a) problem would use.
BLACKWELL_MARKERS = re.compile(r"\bsm_?10[0-3]a?\b|\bblackwell\b|\btcgen05\b|\bnvfp4\b|float4_e2m1|\bb200\b|\bgb200\b",
                               re.IGNORECASE)
KNOWN_ARCHES = {"90": "sm_90a", "100": "sm_100a"}


@dataclass(frozen=True)
class ArchHint:
    arch: str  # sm_90a or sm_100a
    line: int
    why: str  # what in the file says so


def cuda_pins(tree: ast.Module) -> list[int]:
    """Lines inside `make_inputs()` that put a tensor on CUDA explicitly."""
    body = next((node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "make_inputs"), None)
    if body is None:
        return []
    lines: set[int] = set()
    for node in ast.walk(body):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Attribute) and node.func.attr == "cuda":  # x.cuda()
            lines.add(node.lineno)
        for keyword in node.keywords:  # torch.randn(..., device="cuda")
            if keyword.arg == "device" and _names_cuda(keyword.value):
                lines.add(node.lineno)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "to" and any(_names_cuda(a) for a in node.args):
            lines.add(node.lineno)  # x.to("cuda")
    return sorted(lines)


def _names_cuda(value: ast.AST) -> bool:
    """A literal 'cuda'/'cuda:N', or torch.device('cuda…')."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value.split(":")[0].strip().lower() == "cuda"
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "device":
        return any(_names_cuda(arg) for arg in value.args)
    return False


def arch_hint(tree: ast.Module, source: str) -> Optional[ArchHint]:
    """The architecture the file says it needs: an explicit constant first, else a Blackwell-only word."""
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            continue
        names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        match = ARCH_VALUE.match(node.value.value.strip())
        if match and any(name in ARCH_CONSTANTS for name in names):
            arch = KNOWN_ARCHES.get(match.group(1))
            if arch:
                return ArchHint(arch, node.lineno, f"{names[0]} = {node.value.value!r}")
    for number, text in enumerate(source.splitlines(), start=1):
        found = BLACKWELL_MARKERS.search(text)
        if found:
            return ArchHint("sm_100a", number, f"mentions '{found.group(0)}'")
    return None


def shape_constants(tree: ast.Module) -> dict[str, int]:
    """The module-level UPPERCASE integer constants (the production shapes)."""
    shapes: dict[str, int] = {}
    for node in tree.body:
        names = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name) and t.id.isupper()]
        if not (isinstance(node, ast.Assign) and names):
            continue
        try:  # 4096, 1 << 20, 2 * HIDDEN: arithmetic over the constants above
            value = evaluate_work(ast.unparse(node.value), shapes)
        except ExpressionError:
            continue
        if value == int(value) and not isinstance(getattr(node.value, "value", None), float):
            shapes.update({name: int(value) for name in names})
    return shapes


_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow, ast.Mod: operator.mod,
              ast.LShift: operator.lshift, ast.RShift: operator.rshift}


class ExpressionError(ValueError):
    """A sidecar's flops/bytes expression that is not plain arithmetic over the shape constants."""


def evaluate_work(expression: str, shapes: Mapping[str, float]) -> float:
    """Plain arithmetic (+ - * / // % **, parentheses, numbers) over the shape constants; nothing else is run."""
    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in shapes:
                raise ExpressionError(f"'{node.id}' is not a shape constant of the problem")
            return shapes[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            try:
                return _OPERATORS[type(node.op)](walk(node.left), walk(node.right))
            except (TypeError, ZeroDivisionError, OverflowError) as err:
                raise ExpressionError(f"'{ast.unparse(node)}': {err}") from None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        raise ExpressionError(f"'{ast.unparse(node)}' is not plain arithmetic")

    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as err:
        raise ExpressionError(f"'{expression}': {err.msg}") from None
    return float(walk(tree))
