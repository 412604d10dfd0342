# mkb-adversarial: dsl=tirx device=cpu expect=post_timing|correctness
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: honest for the first 12 calls (first call, 7 correctness draws, probe, knockout, +2), then returns the previous call's outputs
# must be rejected because: timed draws are re-checked after timing (the last one and a secret sample of others), so stale outputs are caught; or, earlier, by the probe draw of a secret audit between timed draws (correctness)
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}
HONEST_CALLS = 12
_calls = [0]
_previous = []


def _build(tokens: int, hidden: int):
    @T.prim_func
    def rmsnorm(x_ptr: T.handle, r_ptr: T.handle, w_ptr: T.handle, y_ptr: T.handle, h_ptr: T.handle):
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

    return tvm.compile(tvm.IRModule({"main": rmsnorm}), target="llvm", tir_pipeline="tirx")["main"]


def _kernel(x):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    return _compiled[key]


def solve(x, residual, weight):
    _calls[0] += 1
    kernel = _kernel(x)
    out = torch.empty_like(x)
    h = torch.empty_like(x)
    if _calls[0] <= HONEST_CALLS or not _previous:
        kernel(x, residual, weight, out, h)
        _previous[:] = [out, h]
        return out, h
    kernel(x, residual, weight, torch.empty_like(x), torch.empty_like(x))  # still "launches"
    return _previous[0].clone(), _previous[1].clone()
