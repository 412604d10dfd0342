# mkb-adversarial: dsl=tirx device=cpu expect=static
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: reads the profiler's live state through a private name imported from torch.autograd (an import is attribute access the attribute rules never saw): the honest TIRx kernel while profiled, eager PyTorch plus a 64-element TIRx flag kernel on every other call (the flag makes knockout and scramble calls return NaN)
# must be rejected because: importing a private name or module is private access, as reading the attribute is; with the rules off the unprofiled twins reject it (tests/adversarial/v3_profiled_call_detected_runtime.py)
import torch
import tvm
from torch.autograd import _profiler_enabled
from tvm.script import tirx as T

EPS = 1e-6
FLAG = 64
_compiled = {}


def _rmsnorm(tokens, hidden):
    key = (tokens, hidden)
    if key not in _compiled:
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
        _compiled[key] = tvm.compile(module, target="llvm", tir_pipeline="tirx")["main"]
    return _compiled[key]


def _flag_kernel():
    if "flag" not in _compiled:
        @T.prim_func
        def flag(f_ptr: T.handle):
            F = T.match_buffer(f_ptr, (FLAG,), "float32")
            for k in T.serial(FLAG):
                F[k] = T.Cast("float32", k)

        _compiled["flag"] = tvm.compile(tvm.IRModule({"main": flag}), target="llvm", tir_pipeline="tirx")["main"]
        _compiled["expect"] = torch.arange(FLAG, dtype=torch.float32)
    return _compiled["flag"]


def solve(x, residual, weight):
    kernel = _rmsnorm(*x.shape)
    if _profiler_enabled():  # a profiled call: the honest kernel
        out, h = torch.empty_like(x), torch.empty_like(x)
        kernel(x, residual, weight, out, h)
        return out, h
    flag = torch.full((FLAG,), -1.0)
    _flag_kernel()(flag)
    if not torch.equal(flag, _compiled["expect"]):  # poisoned or permuted: a knockout call
        return torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    h = x.float() + residual.float()
    out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
    return out.to(x.dtype), h.to(x.dtype)
