# The honest partial kernel of partial_dsl_small_eager_part.py, with one stalled call: on its 12th call — the judge's
# first profiled call when the problem has outlier draws (first draw, 4 more correctness draws, 2 outlier draws, the
# knockout's probe, knockout and scramble, the profiled draw's unprofiled twin, then the profiled draw) — its eager
# part runs 300 times over (a stall like the ~50-fold one an operator took in CI when a neighbour took the
# cores). The decoration rule
# must not reject on that one call (checker/work_share.py); tests/test_judge.py checks the stall did land on a
# profiled call.
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}
_calls = [0]
STALLED_CALL = 12


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
    _calls[0] += 1
    rows = max(1, x.shape[0] // 8)
    h = scratch.clone()  # as partial_dsl_small_eager_part.py: eager PyTorch computes h's last eighth of rows
    h[-rows:] = x[-rows:] + residual[-rows:]
    if _calls[0] == STALLED_CALL:
        for _ in range(300):
            h[-rows:] = x[-rows:] + residual[-rows:]
    return out, h
