# mkb-adversarial: dsl=tirx device=cpu expect=dsl_launch
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: compiles a real TIRx kernel (so a compile is on record) but computes the answer in eager PyTorch
# must be rejected because: a compile is not a launch; each call must launch the compiled kernel
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
        _compiled[key] = _build(*key)  # compiled, never called
    h = x.float() + residual.float()
    out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
    return out.to(x.dtype), h.to(x.dtype)
