# mkb-adversarial: dsl=tirx device=cpu expect=correctness
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: replaces sys.modules['mkb_problem'].reference and, through gc.get_objects(), the __code__ of every function named reference and of the judge's own expected_outputs / compare, with a cheap stand-in that agrees with its own output (all ones); its TIRx launch writes ones
# must be rejected because: the reference, the anchor and the comparison run in the checker's process, which the kernel process's patches cannot reach
# skip-static: true
import gc
import sys
import types

import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


# Stand-ins that need no globals: a swapped __code__ runs with the victim's globals.
def _fake_reference(*inputs, **kwargs):
    return inputs[0].new_ones(inputs[0].shape), inputs[0].new_ones(inputs[0].shape)


def _fake_expected(reference, inputs, *args, **kwargs):
    return [inputs[0].new_ones(inputs[0].shape), inputs[0].new_ones(inputs[0].shape)]


def _fake_compare(*args, **kwargs):
    return type("Outcome", (), {"passed": True, "detail": "matches"})()


FAKES = {"reference": _fake_reference, "expected_outputs": _fake_expected, "compare": _fake_compare}


def _poison():
    module = sys.modules.get("mkb_problem")
    if module is not None:
        module.reference = _fake_reference
    for name in ("mkb_ray.checker.correctness", "mkb_ray.checker.pipeline"):
        judge_module = sys.modules.get(name)
        for attr in ("compare", "expected_outputs"):
            if judge_module is not None and hasattr(judge_module, attr):
                setattr(judge_module, attr, FAKES[attr])
    patched = 0
    for obj in gc.get_objects():
        fake = FAKES.get(getattr(obj, "__name__", None)) if isinstance(obj, types.FunctionType) else None
        if fake is None or obj in FAKES.values():
            continue
        if obj.__name__ == "reference" or str(obj.__module__).startswith(("mkb", "__main__")):  # the judge's
            try:
                obj.__code__ = fake.__code__
                patched += 1
            except ValueError:  # a closure with free variables: its code cannot be swapped
                pass
    print(f"poisoned {patched} functions; mkb_problem loaded: {module is not None}", file=sys.stderr)


def _build(tokens: int, hidden: int):
    @T.prim_func
    def ones(y_ptr: T.handle, h_ptr: T.handle):
        Y = T.match_buffer(y_ptr, (tokens, hidden), "bfloat16")
        H = T.match_buffer(h_ptr, (tokens, hidden), "bfloat16")
        for i, j in T.grid(tokens, hidden):
            Y[i, j] = T.bfloat16(1)
            H[i, j] = T.bfloat16(1)

    return tvm.compile(tvm.IRModule({"main": ones}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x, residual, weight):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
        _poison()
    out, h = torch.empty_like(x), torch.empty_like(x)
    _compiled[key](out, h)
    return out, h
