# mkb-adversarial: dsl=tirx device=cpu expect=static
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: imports the problem module the judging worker loaded (registered as `mkb_problem`) and returns its reference's answer
# must be rejected because: only torch, numpy, small stdlib helpers and the variant's DSL may be imported
import torch
import tvm
from tvm.script import tirx as T

import mkb_problem

_compiled = {}


def _build(tokens: int, hidden: int):
    @T.prim_func
    def add(x_ptr: T.handle, r_ptr: T.handle, h_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        R = T.match_buffer(r_ptr, (tokens, hidden), "bfloat16")
        H = T.match_buffer(h_ptr, (tokens, hidden), "bfloat16")
        for i, j in T.grid(tokens, hidden):
            H[i, j] = T.Cast("bfloat16", T.Cast("float32", X[i, j]) + T.Cast("float32", R[i, j]))

    return tvm.compile(tvm.IRModule({"main": add}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x, residual, weight):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    out, _ = mkb_problem.reference(x, residual, weight)
    h = torch.empty_like(x)
    _compiled[key](x, residual, h)
    return out, h
