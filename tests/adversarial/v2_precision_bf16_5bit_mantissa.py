# mkb-adversarial: dsl=tirx device=cpu expect=correctness
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: a real TIRx kernel whose bf16 output keeps only a 5-bit mantissa (truncated) and flushes |y| < 0.02 to zero, staying under the global max rule's 3 x max(ref_err, eps x max|anchor|)
# must be rejected because: the whole-tensor metrics for low-precision outputs (relative L1, RMSE, cosine distance against the reference's own) see the cut
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
                # The cut: a 5-bit mantissa (float32 bits masked to sign, exponent and 5 mantissa bits), and small
                # values flushed to zero.
                Y[i, j] = T.Cast("bfloat16", T.Select(
                    T.abs(h[j] * rstd * T.Cast("float32", W[j])) < T.float32(0.02), T.float32(0),
                    T.reinterpret("float32", T.bitwise_and(T.reinterpret("int32", h[j] * rstd * T.Cast(
                        "float32", W[j])), T.int32(-262144)))))

    module = tvm.IRModule({"main": fused_add_rmsnorm})
    return tvm.compile(module, target="llvm", tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    out = torch.empty_like(x)
    h = torch.empty_like(x)
    _compiled[key](x, residual, weight, out, h)
    return out, h
