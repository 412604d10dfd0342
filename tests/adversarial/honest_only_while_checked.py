# mkb-adversarial: dsl=tirx device=cpu expect=decoration|knockout
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: runs the honest TIRx kernel for the first 10 calls (every check of the fixed protocol), then eager torch.nn.functional.rms_norm plus a decoration launch while timed
# must be rejected because: knockouts are also slipped in at secret positions between timed draws, and there the eager outputs still pass; since the checker profiles a draw before timing, the eager phase is usually caught there (decoration)
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}
CHECKED_CALLS = 10  # first call + 5 draws + 2 outlier draws + probe + knockout
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
    out = torch.empty_like(x)
    h = torch.empty_like(x)
    kernel(x, residual, weight, out, h)  # the launch every call needs...
    if _calls[0] <= CHECKED_CALLS:
        return out, h
    hh = x.float() + residual.float()  # ...but what is timed (and returned) is eager PyTorch
    rms = torch.nn.functional.rms_norm(hh, (x.shape[-1],), weight.float(), eps=EPS)
    return rms.to(x.dtype), hh.to(x.dtype)
