# mkb-adversarial: dsl=tirx device=cpu expect=knockout
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: counts its calls and returns NaN on call 10 (where the fixed protocol puts the knockout); eager PyTorch + scratch kernel otherwise
# must be rejected because: the knockout runs on fresh draws and again in audits at secret positions between timed draws; there the eager outputs still pass
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
KNOCKOUT_CALL = 10  # 1 first call + 5 draws + 2 outlier draws + probe + knockout
_compiled = {}
_calls = [0]


def _build(tokens: int, hidden: int):
    @T.prim_func
    def add(x_ptr: T.handle, r_ptr: T.handle, s_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        R = T.match_buffer(r_ptr, (tokens, hidden), "bfloat16")
        S = T.match_buffer(s_ptr, (tokens, hidden), "float32")
        for i, j in T.grid(tokens, hidden):
            S[i, j] = T.Cast("float32", X[i, j]) + T.Cast("float32", R[i, j])

    return tvm.compile(tvm.IRModule({"main": add}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x, residual, weight):
    _calls[0] += 1
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    scratch = torch.empty(x.shape, dtype=torch.float32)
    _compiled[key](x, residual, scratch)
    if _calls[0] == KNOCKOUT_CALL:
        return torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    h = x.float() + residual.float()
    out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
    return out.to(x.dtype), h.to(x.dtype)
