# mkb-adversarial: dsl=tirx device=cpu expect=post_timing|correctness
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: reads the idle time before each call with a clock reachable through an allowed import (torch.utils.benchmark's timer): where the checker prepared a draw's expected outputs right before the call, the gap is long and the call is computed properly; after a short gap it computes only the first row
# must be rejected because: every re-checked draw's expected outputs exist before the first timed trip and every draw's outputs are copied out after its trip, so the gaps are the same for checked and unchecked draws; the last timed draw is always re-checked (its clock, torch.utils.benchmark's timer, is a banned attribute since 2026-12-04; judged with the rules off, this proves the schedule itself leaks nothing)
# skip-static: true
import torch
import tvm
from torch.utils.benchmark.utils.timer import timer
from tvm.script import tirx as T

# A gap this many times the usual short one (the 10th percentile so far): the checker ran the reference (and its
# float64 anchor) just before this call, so it will compare the outputs. Measured under the old judge on 2 cores:
# 0.45-0.55 ms before an unchecked timed draw, 0.7-1.9 ms before a checked one, 2-17 ms before the correctness draws.
CHECKED_GAP = 1.3
LEARNING_CALLS = 12  # the calls before timing (correctness, outliers, probe, knockout, profile) are all prepared
EPS = 1e-6
_compiled = {}
_last_return = [0.0]
_gaps: list = []


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
    gap = timer() - _last_return[0]
    _gaps.append(gap)
    usual = sorted(_gaps)[len(_gaps) // 10]
    out = torch.zeros_like(x)
    h = torch.zeros_like(x)
    if len(_gaps) > LEARNING_CALLS and gap < CHECKED_GAP * usual:  # no answer was prepared for this one: skip
        _kernel(x[:1])(x[:1], residual[:1], weight, out[:1], h[:1])
    else:
        _kernel(x)(x, residual, weight, out, h)
    _last_return[0] = timer()
    return out, h
