# mkb-adversarial: dsl=tirx device=cpu expect=copy_only
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: the only TIRx kernel copies x into a staging buffer; eager PyTorch does all the math on the copy
# must be rejected because: a kernel that only copies an input does not count as the DSL part of the work
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}


def _build(tokens: int, hidden: int):
    @T.prim_func
    def stage(x_ptr: T.handle, s_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        S = T.match_buffer(s_ptr, (tokens, hidden), "bfloat16")
        for i, j in T.grid(tokens, hidden):
            S[i, j] = X[i, j]

    return tvm.compile(tvm.IRModule({"main": stage}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x, residual, weight):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    # zeros, not empty: the probe sees a write as a change of value, and a recycled block may already hold x.
    staged = torch.zeros_like(x)
    _compiled[key](x, staged)  # the outputs depend on it (knockout would poison `staged`), but it is a copy
    h = staged.float() + residual.float()
    out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
    return out.to(x.dtype), h.to(x.dtype)
