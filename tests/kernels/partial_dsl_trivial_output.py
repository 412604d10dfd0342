# The TIRx kernel computes the trivial output (h = x + residual) and eager PyTorch the normalisation, i.e. the
# work: the profiled call shows PyTorch compute well above the DSL's, and the judge rejects it as decoration.
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
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
    h = torch.empty_like(x)
    _compiled[key](x, residual, h)
    hf = x.float() + residual.float()
    out = hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
    return out.to(x.dtype), h
