# mkb-adversarial: dsl=tirx device=cpu expect=static
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: computes the whole answer with Python operators on numpy arrays (+, *, @, **: no aten operator and no Python-level call the profiler's tracer records; in and out through DLPack and as_tensor, which it files as glue), so the profiled calls show only aten glue and a DSL share of 100 %; a 64-element TIRx flag kernel makes knockout and scramble calls return NaN
# must be rejected because: numpy is not an allowed import: its operators compute where neither the profiler nor the DSL's launch record can see (the old judge passed it: DSL share 57 %, eager compute 3 % of the reference's); with the rules off it still passes, a limit problems/CONTRACT.md names (the verdict's wall-time split shows 96 % of each call outside the DSL)
import numpy as np
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
FLAG = 64
_compiled = {}


def _flag_kernel():
    if "flag" not in _compiled:
        @T.prim_func
        def flag(f_ptr: T.handle):
            F = T.match_buffer(f_ptr, (FLAG,), "float32")
            for k in T.serial(FLAG):
                F[k] = T.Cast("float32", k)

        _compiled["flag"] = tvm.compile(tvm.IRModule({"main": flag}), target="llvm", tir_pipeline="tirx")["main"]
        _compiled["expect"] = torch.arange(FLAG, dtype=torch.float32)
    return _compiled["flag"]


def solve(x, residual, weight):
    flag = torch.full((FLAG,), -1.0)
    _flag_kernel()(flag)
    if not torch.equal(flag, _compiled["expect"]):  # poisoned or permuted: a knockout call
        return torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    # In and out through DLPack and as_tensor: conversions the profiler files as glue, not as numpy calls.
    h = np.from_dlpack(x.float()) + np.from_dlpack(residual.float())
    hidden = h.shape[-1]
    if hidden not in _compiled:  # made once: the calls judged hold no numpy function call at all
        _compiled[hidden] = np.ones((hidden, 1), dtype=np.float32) * np.float32(1.0 / hidden)
    ones = _compiled[hidden]
    rstd = ((h * h) @ ones + np.float32(EPS)) ** np.float32(-0.5)
    out = h * rstd * np.from_dlpack(weight.float())
    return torch.as_tensor(out).to(x.dtype), torch.as_tensor(h).to(x.dtype)
