# mkb-adversarial: dsl=tirx device=cpu expect=knockout
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: launches a real TIRx kernel on a scratch buffer every call while eager PyTorch computes the outputs
# must be rejected because: with the DSL launches suppressed (knockout) the outputs still pass, so the DSL was decoration
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}


def _build(tokens: int, hidden: int):
    @T.prim_func
    def sum_of_squares(x_ptr: T.handle, r_ptr: T.handle, s_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        R = T.match_buffer(r_ptr, (tokens, hidden), "bfloat16")
        S = T.match_buffer(s_ptr, (tokens,), "float32")
        for i in T.serial(tokens):
            S[i] = T.float32(0)
            for j in T.serial(hidden):
                h = T.Cast("float32", X[i, j]) + T.Cast("float32", R[i, j])
                S[i] = S[i] + h * h

    return tvm.compile(tvm.IRModule({"main": sum_of_squares}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x, residual, weight):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    scratch = torch.empty(x.shape[0], dtype=torch.float32)
    _compiled[key](x, residual, scratch)  # real work, thrown away
    h = x.float() + residual.float()
    out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
    return out.to(x.dtype), h.to(x.dtype)
