# mkb-adversarial: dsl=tirx device=cpu expect=correctness
# problem: mlp_norm/02_silu_and_mul
# hack: writes silu(gate) * up into a full-width (tokens, 2*I) buffer and returns all of it (correct values in the first half)
# must be rejected because: outputs must have the reference's shape (tokens, I)
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(tokens: int, d: int):
    @T.prim_func
    def silu_and_mul(x_ptr: T.handle, o_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, 2 * d), "bfloat16")
        O = T.match_buffer(o_ptr, (tokens, 2 * d), "bfloat16")
        for i, j in T.grid(tokens, d):
            g = T.Cast("float32", X[i, j])
            u = T.Cast("float32", X[i, d + j])
            O[i, j] = T.Cast("bfloat16", g / (T.float32(1) + T.exp(T.float32(0) - g)) * u)
            O[i, d + j] = X[i, d + j]

    return tvm.compile(tvm.IRModule({"main": silu_and_mul}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x):
    tokens, two_d = x.shape
    key = (tokens, two_d // 2)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    out = torch.empty_like(x)
    _compiled[key](x, out)
    return out
