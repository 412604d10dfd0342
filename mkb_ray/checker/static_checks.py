"""Source-level rules a submission must satisfy before any of it runs.

A kernel file is parsed, never imported, here. The rules close the cheap escapes from the implementation
boundary: other compilers (torch.compile, Triton, inline CUDA), process/thread/stream tricks, reflection that
could reach the judge's own state, and patching of timers or synchronisation. Each violation names its rule and
line, so the agent gets a specific reason.
"""
from __future__ import annotations

import ast
import string
from dataclasses import dataclass

# Standard-library and numeric modules any kernel may import.
# Not numpy: its arithmetic operators on arrays run compute that neither the profiler (no aten operator, no Python
# call for its tracer) nor the DSL's launch record sees (tests/adversarial/v3_decoration_numpy_operators.py); and
# no kernel needs a second array library beside torch.
_COMMON_IMPORTS = ("torch", "math", "functools", "typing", "dataclasses", "itertools", "operator", "enum",
                   "collections", "__future__")
_DSL_IMPORTS = {
    "cutedsl": ("cutlass",),
    "tirx": ("tvm",),
}
# Sub-packages of the allowed roots that reach compilers, runtimes or internals a kernel has no business with.
_BANNED_IMPORT_PREFIXES = (
    "torch._dynamo", "torch._inductor", "torch.utils.cpp_extension", "torch.jit", "torch.cuda.graphs",
    "torch.library", "torch._C", "torch.multiprocessing", "torch.distributed",
    "cutlass.base_dsl", "cutlass._mlir", "cutlass.cutlass_dsl",
    "tvm.contrib", "tvm.rpc", "tvm.support", "tvm.runtime", "tvm.ffi", "tvm_ffi",
)
# Builtins that run code, open files or reflect: banned wherever they are named, not only where called, because
# `run = exec` followed by `run(...)` is a call of `run`.
_BANNED_BUILTINS = {
    "eval", "exec", "compile", "__import__", "open", "getattr", "setattr", "delattr", "globals", "locals",
    "vars", "breakpoint", "memoryview",
}
# Builtins that are harmless to name (common variable names) but not to call.
_BANNED_CALLS = {"input", "exit", "quit"}
# Attribute names that reach other compilers, concurrency, the process, or prebuilt binaries.
_BANNED_ATTRIBUTES = {
    "compile": "torch.compile is another compiler",
    "jit": "torch.jit is another compiler",
    "cpp_extension": "inline C++/CUDA extensions bypass the DSL",
    "load_inline": "inline C++/CUDA extensions bypass the DSL",
    "Stream": "CUDA streams can hide work from the timer",
    "stream": "CUDA streams can hide work from the timer",
    "set_stream": "CUDA streams can hide work from the timer",
    "ExternalStream": "CUDA streams can hide work from the timer",
    "CUDAGraph": "CUDA graphs replay work outside the measured call",
    "graph": "CUDA graphs replay work outside the measured call",
    "make_graphed_callables": "CUDA graphs replay work outside the measured call",
    "load_module": "loading prebuilt modules bypasses the judged source",
    "export_library": "exporting/loading prebuilt modules bypasses the judged source",
    "time_evaluator": "the kernel must not time itself",
    "profiler": "the profiler's state is the judge's (and a kernel must not tell profiled calls apart)",
    "os": "the process is the judge's, not the kernel's",
    "sys": "the process is the judge's, not the kernel's",
    "subprocess": "subprocesses are not allowed",
    "ctypes": "raw foreign calls are not allowed",
    "builtins": "reflection on builtins is not allowed",
    "importlib": "dynamic imports are not allowed",
    "_getframe": "frame introspection can read the judge's state",
    "library": "custom torch operators bypass the DSL",
    "ops": "custom torch operator namespaces can hide non-DSL kernels",
    "multiprocessing": "subprocesses are not allowed",
    # Threads through the standard library's re-exports (torch.cuda.threading, torch.cuda.tunable.concurrent, ...):
    # the profiler records only the threads it was started on, so eager work on another thread is invisible to it.
    "threading": "threads are not allowed",
    "Thread": "threads are not allowed",
    "concurrent": "threads are not allowed",
    "ThreadPoolExecutor": "threads are not allowed",
    "numpy": "numpy arrays compute outside the DSL and outside the profiler's record",
    # Clocks, under any module's name (torch.utils.benchmark.utils.timer.timer is time.perf_counter): with one, a
    # kernel can tell the calls the judge profiles by the profiler's own cost (its Python tracer makes a Python
    # call ~6x slower) and do the work only there (tests/adversarial/v3_profiled_call_detected_by_tracer_cost.py).
    **{name: "a kernel has no use for a clock (it could tell profiled calls by their cost)" for name in (
        "time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "process_time",
        "thread_time", "default_timer", "timer", "Timer", "timeit", "benchmark", "file_baton")},
    # getattr by other names.
    "attrgetter": "operator.attrgetter is reflection (getattr by another name)",
    "methodcaller": "operator.methodcaller is reflection (getattr by another name)",
    "get_type_hints": "evaluates annotation strings as code",
    "singledispatch": "evaluates annotation strings as code (via get_type_hints)",
    "singledispatchmethod": "evaluates annotation strings as code (via get_type_hints)",
    # TVM's global-function registry and packed calls: a kernel calling back into Python (or into any registered
    # function) would hand its work to eager code while counting as a DSL launch.
    "register_global_func": "registered host callbacks run outside the DSL kernel",
    "register_func": "registered host callbacks run outside the DSL kernel",
    "get_global_func": "the global-function registry reaches runtime internals",
    **{name: "packed calls run host functions outside the DSL kernel" for name in (
        "call_packed", "call_cpacked", "call_packed_lowered", "call_cpacked_lowered", "tvm_call_packed",
        "tvm_call_cpacked", "tvm_call_packed_lowered", "tvm_call_cpacked_lowered", "anylist_setitem_call_packed",
        "anylist_setitem_call_cpacked")},
    # Writing files plus any loader of code or pickles (torch.hub, numpy's C-extension builders) runs code the
    # static rules never saw.
    "tofile": "writing files is not allowed",
    "hub": "torch.hub loads and runs code from files",
    "package": "torch.package loads pickled code",
    "load_library": "loading shared libraries bypasses the DSL",
    "ctypeslib": "raw foreign calls are not allowed",
    "f2py": "numpy.f2py builds native extensions",
    "extbuild": "numpy.testing.extbuild builds native extensions",
    # TVM's lower-level builders return modules the launch monitor never sees (uncounted, unchecked launches).
    "build": "compile with tvm.compile, the monitored entry point",
    "build_module": "compile with tvm.compile, the monitored entry point",
    "codegen": "compile with tvm.compile, the monitored entry point",
}
# Functions of torch/numpy that read or write files; loading unpickles, which runs arbitrary code.
_BANNED_MODULE_FUNCTIONS = {"torch": {"load", "save"}, "numpy": {"load", "save", "savez", "fromfile", "memmap"}}
_BANNED_KEYWORDS = {
    "allow_pickle": "unpickling runs arbitrary code",
    "weights_only": "unpickling runs arbitrary code",
    "pickle_module": "unpickling runs arbitrary code",
}
_BANNED_NAMES = {
    "reference": "calling the problem's reference is not allowed",
    "make_inputs": "calling the problem's input generator is not allowed",
}
_ALLOWED_DUNDERS = {"__init__", "__name__"}


@dataclass(frozen=True)
class StaticViolation:
    rule: str
    line: int
    detail: str

    def describe(self) -> str:
        return f"line {self.line}: {self.detail} [{self.rule}]"


def _import_allowed(module: str, dsl: str) -> bool:
    if any(module == p or module.startswith(p + ".") for p in _BANNED_IMPORT_PREFIXES):
        return False
    roots = _COMMON_IMPORTS + _DSL_IMPORTS.get(dsl, ())
    return any(module == r or module.startswith(r + ".") for r in roots)


class _Checker(ast.NodeVisitor):
    def __init__(self, dsl: str) -> None:
        self.dsl = dsl
        self.violations: list[StaticViolation] = []
        # Local name -> root module it stands for (`import torch as t` gives t -> torch).
        self.module_aliases: dict[str, str] = {}

    def _flag(self, rule: str, node: ast.AST, detail: str) -> None:
        self.violations.append(StaticViolation(rule, getattr(node, "lineno", 0), detail))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not _import_allowed(alias.name, self.dsl):
                self._flag("banned_import", node, f"import of '{alias.name}' is not allowed for the {self.dsl} variant")
            self._flag_module_path(alias.name, node)
            self.module_aliases[(alias.asname or alias.name).split(".")[0]] = alias.name.split(".")[0]
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self._flag("banned_import", node, "relative imports are not allowed")
        elif not _import_allowed(module, self.dsl):
            self._flag("banned_import", node, f"import from '{module}' is not allowed for the {self.dsl} variant")
        self._flag_module_path(module, node)
        for alias in node.names:
            full = f"{module}.{alias.name}"
            if alias.name == "*":
                self._flag("banned_import", node, "star imports are not allowed")
            elif alias.name in _BANNED_ATTRIBUTES or any(full.startswith(p) for p in _BANNED_IMPORT_PREFIXES):
                self._flag("banned_attribute", node, f"'{full}': {_BANNED_ATTRIBUTES.get(alias.name, 'banned module')}")
            elif alias.name.startswith("_"):
                self._flag("private_access", node, f"import of private name '{full}' is not allowed")
            self.module_aliases[alias.asname or alias.name] = module.split(".")[0]
        self.generic_visit(node)

    def _flag_module_path(self, module: str, node: ast.AST) -> None:
        # An import is attribute access the Attribute rule never sees: `from torch.autograd import _profiler_enabled`
        # read the profiler's live state (which calls are profiled), `import torch.utils.data._utils.worker as w`
        # reaches a module's private internals, `import torch.autograd.profiler as p` the profiler.
        parts = module.split(".")[1:]
        private = [part for part in parts if part.startswith("_") and part != "__future__"]
        banned = [part for part in parts if part in _BANNED_ATTRIBUTES]
        if private:
            self._flag("private_access", node, f"import of private module '{module}' is not allowed")
        elif banned:
            self._flag("banned_attribute", node, f"import of '{module}': {_BANNED_ATTRIBUTES[banned[0]]}")

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in _BANNED_CALLS:
            self._flag("banned_call", node, f"call of builtin '{node.func.id}()' is not allowed")
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("format", "format_map"):
            problem = _format_template_problem(node.func.value)
            if problem:
                self._flag("format_reflection", node, problem)
        for keyword in node.keywords:
            if keyword.arg in _BANNED_KEYWORDS:
                self._flag("banned_call", node, f"keyword '{keyword.arg}=': {_BANNED_KEYWORDS[keyword.arg]}")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = node.attr
        root = _chain_root(node)
        if name.startswith("__") and name.endswith("__") and name not in _ALLOWED_DUNDERS:
            self._flag("dunder_access", node, f"access to '{name}' is not allowed (reflection)")
        elif name in _BANNED_ATTRIBUTES and not self._is_dsl_compile(node):
            self._flag("banned_attribute", node, f"'.{name}': {_BANNED_ATTRIBUTES[name]}")
        elif name in _BANNED_MODULE_FUNCTIONS.get(self.module_aliases.get(root or "", ""), ()):
            self._flag("banned_attribute", node, f"'{ast.unparse(node)}': file I/O and unpickling are not allowed")
        elif name.startswith("_") and root not in ("self", "cls"):
            # Private state of the DSL runtimes, torch or the judge's wrappers (e.g. the launch monitor behind a
            # compiled kernel) is not the submission's to read.
            self._flag("private_access", node, f"access to private attribute '{name}' is not allowed")
        self.generic_visit(node)

    def _is_dsl_compile(self, node: ast.Attribute) -> bool:
        # `cute.compile`, `cute.jit` and `tvm.compile` are the DSLs' own entry points; `torch.compile` is not.
        if node.attr not in ("compile", "jit"):
            return False
        base = node.value
        while isinstance(base, ast.Attribute):
            base = base.value
        return isinstance(base, ast.Name) and self.module_aliases.get(base.id) in {"cutlass", "tvm"}

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in _BANNED_BUILTINS:
            self._flag("banned_call", node, f"builtin '{node.id}' is not allowed (called or passed around)")
        if node.id in _BANNED_NAMES:
            self._flag("banned_name", node, f"'{node.id}': {_BANNED_NAMES[node.id]}")
        if node.id.startswith("__") and node.id.endswith("__") and node.id not in _ALLOWED_DUNDERS:
            self._flag("dunder_access", node, f"use of '{node.id}' is not allowed (reflection)")
        self.generic_visit(node)

    def _check_assignment_target(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, ast.Attribute):
            base = target.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in self.module_aliases:
                dotted = ast.unparse(target)
                self._flag("module_patch", node, f"assigning '{dotted}' patches an imported module")
            elif not isinstance(base, ast.Name):
                # `type(x).attr = ...` or `[torch.Tensor][0].attr = ...` reach classes without naming them.
                dotted = ast.unparse(target)
                self._flag("module_patch", node, f"assigning '{dotted}' may patch an imported class")
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._check_assignment_target(element, node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_assignment_target(target, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_assignment_target(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_assignment_target(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._check_assignment_target(target, node)
        self.generic_visit(node)


def _format_fields_reach(template: str) -> bool:
    """Whether a str.format template's fields read attributes or items (`{0.__closure__[0]}`), also nested ones."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError:
        return True
    for _, field, spec, _ in parsed:
        if field and ("." in field or "[" in field):
            return True
        if spec and "{" in spec and _format_fields_reach(spec):
            return True
    return False


def _format_template_problem(template: ast.AST) -> str:
    """Why `<template>.format(...)` is not allowed ('' when it is): str.format's field syntax is attribute and
    item access the other rules never see."""
    if not (isinstance(template, ast.Constant) and isinstance(template.value, str)):
        return "str.format/format_map on a template that is not a string literal (its fields could read attributes)"
    if _format_fields_reach(template.value):
        return "str.format fields that read attributes or items ('{0.x}', '{0[k]}') are reflection; use f-strings"
    return ""


def _chain_root(node: ast.AST) -> str | None:
    """The name an attribute chain starts from (`torch` in `torch.cuda.synchronize`), None if not a name."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _add_assigned_aliases(tree: ast.AST, aliases: dict[str, str]) -> None:
    """`Tensor = torch.Tensor` makes `Tensor` stand for torch too (so `Tensor.any = ...` is a module patch)."""
    changed = True
    while changed:
        changed = False
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, (ast.Name, ast.Attribute))):
                continue
            root = aliases.get(_chain_root(node.value) or "")
            for target in node.targets:
                if root and isinstance(target, ast.Name) and target.id not in aliases:
                    aliases[target.id] = root
                    changed = True


def check_source(source: str, dsl: str) -> list[StaticViolation]:
    """All rule violations in a kernel's source text; empty when it may run."""
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        return [StaticViolation("syntax_error", err.lineno or 0, f"syntax error: {err.msg}")]
    checker = _Checker(dsl)
    # Imports first, so that uses of module aliases are recognised wherever they appear.
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                checker.module_aliases[(alias.asname or alias.name).split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                checker.module_aliases[alias.asname or alias.name] = node.module.split(".")[0]
    _add_assigned_aliases(tree, checker.module_aliases)
    checker.visit(tree)
    defines_solve = any(isinstance(n, ast.FunctionDef) and n.name == "solve" for n in tree.body)
    if not defines_solve:
        checker.violations.append(StaticViolation("no_solve", 0, "the file defines no top-level 'solve(*inputs)'"))
    return checker.violations
