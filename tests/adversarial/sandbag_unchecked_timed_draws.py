# mkb-adversarial: dsl=tirx device=cpu expect=post_timing|correctness
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: counts calls and, during timing, computes only the first row except on the final timed draw (the one the judge used to re-check)
# must be rejected because: a secret random sample of timed draws is re-checked besides the last, so a kernel cannot know which draws it may skip; or, earlier, by the probe draw of a secret audit between timed draws (correctness)
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}
CHECKED_CALLS = 11  # 5 draws + 2 outlier draws + probe + knockout + scramble + the profiled draw
TIMED_CALLS = 60  # the production protocol: warmup=10 + timed=50
_calls = [0]


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
    out = torch.zeros_like(x)
    h = torch.zeros_like(x)
    timing = CHECKED_CALLS < _calls[0] < CHECKED_CALLS + TIMED_CALLS
    if timing:  # 1 row instead of all: a fake speedup on every draw but the last
        _kernel(x[:1])(x[:1], residual[:1], weight, out[:1], h[:1])
    else:
        kernel(x, residual, weight, out, h)
    return out, h
