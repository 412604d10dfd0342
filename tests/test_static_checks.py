"""Source rules: real solutions pass them; each class of escape is caught with its rule name and line."""
from __future__ import annotations

import pytest

from mkb_ray.checker.static_checks import check_source

HEADER = "import torch\nimport tvm\nfrom tvm.script import tirx as T\n"


def rules(body: str, dsl: str = "tirx") -> set[str]:
    return {v.rule for v in check_source(HEADER + body + "\ndef solve(x):\n    return x\n", dsl)}


def test_every_shipped_solution_passes_the_static_rules(problems):
    for problem in problems.problems:
        for variant, path in problem.solutions.items():
            dsl = "cutedsl" if variant == "cutedsl" else "tirx"
            assert check_source(path.read_text(), dsl) == [], (problem.problem_id, variant)


@pytest.mark.parametrize("body, rule", [
    ("import triton", "banned_import"),
    ("import cutlass", "banned_import"),  # the other DSL is not this variant's
    ("import ctypes", "banned_import"),
    ("import threading", "banned_import"),
    ("from torch.utils.cpp_extension import load_inline", "banned_import"),
    ("f = torch.compile(lambda x: x)", "banned_attribute"),
    ("t = torch\nf = t.compile(lambda x: x)", "banned_attribute"),
    ("s = torch.cuda.Stream()", "banned_attribute"),
    ("g = torch.cuda.CUDAGraph()", "banned_attribute"),
    ("m = tvm.runtime.load_module('k.so')", "banned_attribute"),
    ("p = torch.os.getpid()", "banned_attribute"),
    ("torch.cuda.synchronize = lambda: None", "module_patch"),
    ("x = eval('1')", "banned_call"),
    ("f = getattr(torch, 'compile')", "banned_call"),
    ("b = torch.__dict__", "dunder_access"),
    ("r = reference", "banned_name"),
    ("run = exec", "banned_call"),  # a banned builtin passed around is as bad as one called
    ("Tensor = torch.Tensor\nTensor.any = None", "module_patch"),  # an alias bound by assignment
    ("type(torch.zeros(1)).any = None", "module_patch"),  # a class reached through a call
    ("mode = tvm.compile(None)._function", "private_access"),  # the judge's wrappers hide nothing worth reading
    ("f = tvm.register_global_func('cb')", "banned_attribute"),  # Python callbacks from a TIRx kernel
    ("e = T.call_packed('cb')", "banned_attribute"),
    ("m = tvm.build(None, target='llvm')", "banned_attribute"),  # a builder the launch monitor never sees
    ("d = torch.load('f.pt')", "banned_attribute"),  # unpickling runs arbitrary code
    ("a = torch.zeros(1).numpy().tofile('f')", "banned_attribute"),
    ("o = torch.zeros(1).max(weights_only=False)", "banned_call"),
    ("d = torch._dynamo", "private_access"),
    # An import is attribute access too: private names and modules, and threads under any module's name.
    ("from torch.autograd import _profiler_enabled", "private_access"),  # which calls are profiled
    ("from dataclasses import _thread", "private_access"),  # the raw-thread module, re-exported
    ("import torch.utils.data._utils.worker as w", "private_access"),
    ("t = torch.cuda.threading.Thread(target=None)", "banned_attribute"),
    ("from torch.cuda import threading", "banned_attribute"),
    ("import numpy", "banned_import"),  # its operators compute where neither profiler nor launch record sees
    ("a = torch.zeros(1).numpy()", "banned_attribute"),
    # Clocks under any name: with one, the profiler's own cost tells the profiled calls apart.
    ("from torch.utils.benchmark.utils.timer import timer", "banned_attribute"),
    ("import torch.utils.benchmark.utils.common as c", "banned_attribute"),
    ("import torch.autograd.profiler as p", "banned_attribute"),  # a module path is attribute access too
    ("t = torch.utils.file_baton.time.perf_counter()", "banned_attribute"),
])
def test_each_escape_is_flagged(body, rule):
    assert rule in rules(body)


def test_dsl_compile_entry_points_are_allowed():
    assert rules("exe = tvm.compile(None, target='llvm')") == set()
    source = "import torch\nimport cutlass.cute as cute\nf = cute.compile\ndef solve(x):\n    return x\n"
    assert check_source(source, "cutedsl") == []


def test_violations_name_the_line():
    (violation,) = check_source("import torch\n\n\nimport subprocess\ndef solve():\n    pass\n", "tirx")
    assert violation.line == 4 and "subprocess" in violation.describe()


def test_a_file_without_solve_is_rejected():
    assert {v.rule for v in check_source("import torch\n", "tirx")} == {"no_solve"}
