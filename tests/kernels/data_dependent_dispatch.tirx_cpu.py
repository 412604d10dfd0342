# Not a hack: an honest SwiGLU (mlp_norm/02_silu_and_mul) that picks one of two TIRx kernels per call from the data.
# By the sign of the first gate (a stand-in for a real data test, e.g. a range or sparsity check, that comes out
# either way from draw to draw), a kernel that walks the output row-major or one that walks it column-major. The two take their buffers in different orders (out first in the second), so the DSL launch at a
# given position of one call writes a different argument than the launch at that position of another call. Must
# pass: knockout and scramble act on what each launch wrote in their own call, never on another call's positions.
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _row_major(tokens: int, d: int):
    @T.prim_func
    def silu_and_mul(x_ptr: T.handle, o_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, 2 * d), "bfloat16")
        O = T.match_buffer(o_ptr, (tokens, d), "bfloat16")
        for i in T.serial(tokens):
            for j in T.serial(d):
                g = T.Cast("float32", X[i, j])
                O[i, j] = T.Cast("bfloat16", g / (T.float32(1) + T.exp(T.float32(0) - g)) * T.Cast("float32", X[i, d + j]))

    return tvm.compile(tvm.IRModule({"main": silu_and_mul}), target="llvm", tir_pipeline="tirx")["main"]


def _column_major(tokens: int, d: int):
    @T.prim_func
    def silu_and_mul_by_column(o_ptr: T.handle, x_ptr: T.handle):
        O = T.match_buffer(o_ptr, (tokens, d), "bfloat16")
        X = T.match_buffer(x_ptr, (tokens, 2 * d), "bfloat16")
        for j in T.serial(d):
            for i in T.serial(tokens):
                g = T.Cast("float32", X[i, j])
                O[i, j] = T.Cast("bfloat16", g / (T.float32(1) + T.exp(T.float32(0) - g)) * T.Cast("float32", X[i, d + j]))

    return tvm.compile(tvm.IRModule({"main": silu_and_mul_by_column}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor):
    tokens, two_d = x.shape
    d = two_d // 2
    if (tokens, d) not in _compiled:
        _compiled[(tokens, d)] = (_row_major(tokens, d), _column_major(tokens, d))
    row_major, column_major = _compiled[(tokens, d)]
    x = x.contiguous()
    out = torch.empty(tokens, d, dtype=x.dtype, device=x.device)
    if bool(x[0, 0] >= 0):
        row_major(x, out)
    else:
        column_major(out, x)
    return out
