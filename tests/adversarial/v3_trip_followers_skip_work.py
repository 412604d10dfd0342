# mkb-adversarial: dsl=tirx device=cpu expect=post_timing|correctness
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: tells the draws of a multi-draw timed round trip apart by the clock (a call that starts right after the previous one returned is a follower in the same trip) and computes only the first row on followers
# must be rejected because: every draw of a trip sits in its own bank in a secret order and any of them may be re-checked; the last timed draw, always a follower, always is
# skip-static: true
# draws-per-trip: 5
import time

import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
FOLLOWER_GAP_S = 0.002  # between two calls of one trip there is no message, no draw and no check
_compiled = {}
_last_return = [0.0]


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
    follower = time.perf_counter() - _last_return[0] < FOLLOWER_GAP_S
    out = torch.zeros_like(x)
    h = torch.zeros_like(x)
    if follower:  # one row instead of all: a fake speedup on 4 of every 5 timed draws
        _kernel(x[:1])(x[:1], residual[:1], weight, out[:1], h[:1])
    else:
        _kernel(x)(x, residual, weight, out, h)
    _last_return[0] = time.perf_counter()
    return out, h
