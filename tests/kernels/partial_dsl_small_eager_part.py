# Not a hack under the MetaKernelBench boundary: the TIRx kernel does the work (the normalisation and most of
# h = x + residual) and eager PyTorch computes the last eighth of h's rows into a copy of what the DSL wrote.
# Accepted: the DSL's share of the compute is well above half, and the eager part reads ~4 % of the reference's
# input elements, under the yardstick's element bar (checker/work_share.py), so no wall-time ratio decides this
# verdict (on a loaded CI host the eager add's profiled time read 54 % and 138 % of the reference's when h was
# wholly eager). The verdict records that eager code computed output 1 (dsl_outputs_only=False).
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}


def _build(tokens: int, hidden: int):
    @T.prim_func
    def fused_add_rmsnorm(x_ptr: T.handle, r_ptr: T.handle, w_ptr: T.handle, y_ptr: T.handle, h_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        R = T.match_buffer(r_ptr, (tokens, hidden), "bfloat16")
        W = T.match_buffer(w_ptr, (hidden,), "bfloat16")
        Y = T.match_buffer(y_ptr, (tokens, hidden), "bfloat16")
        H = T.match_buffer(h_ptr, (tokens, hidden), "bfloat16")
        h = T.alloc_buffer((hidden,), "float32")
        acc = T.alloc_buffer((1,), "float32")
        for i in T.serial(tokens):
            acc[0] = T.float32(0)
            for j in T.serial(hidden):
                h[j] = T.Cast("float32", X[i, j]) + T.Cast("float32", R[i, j])
                H[i, j] = T.Cast("bfloat16", h[j])
                acc[0] = acc[0] + h[j] * h[j]
            for j in T.serial(hidden):
                rstd = T.rsqrt(acc[0] / T.float32(hidden) + T.float32(EPS))
                Y[i, j] = T.Cast("bfloat16", h[j] * rstd * T.Cast("float32", W[j]))

    module = tvm.IRModule({"main": fused_add_rmsnorm})
    return tvm.compile(module, target="llvm", tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    out = torch.empty_like(x)
    scratch = torch.empty_like(x)
    _compiled[key](x, residual, weight, out, scratch)
    rows = max(1, x.shape[0] // 8)
    h = scratch.clone()  # glue: a copy of the DSL's h, then eager PyTorch computes its last rows
    h[-rows:] = x[-rows:] + residual[-rows:]
    return out, h
