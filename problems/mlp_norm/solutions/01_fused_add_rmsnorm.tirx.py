"""TIRx (sm_90a) solution: one CTA of 256 threads per token row. Pass 1 writes h = x + residual and sums h*h
(CTA-wide sum through shared memory); pass 2 recomputes h in fp32 and writes h * rstd * weight."""
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
THREADS = 256
_compiled = {}


def _build(tokens: int, hidden: int):
    iters = hidden // THREADS

    @T.prim_func
    def fused_add_rmsnorm(x_ptr: T.handle, r_ptr: T.handle, w_ptr: T.handle, y_ptr: T.handle, h_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        R = T.match_buffer(r_ptr, (tokens, hidden), "bfloat16")
        W = T.match_buffer(w_ptr, (hidden,), "bfloat16")
        Y = T.match_buffer(y_ptr, (tokens, hidden), "bfloat16")
        H = T.match_buffer(h_ptr, (tokens, hidden), "bfloat16")
        T.device_entry()
        row = T.cta_id([tokens])
        tx = T.thread_id([THREADS])
        scratch = T.alloc_shared((THREADS // 32,), "float32")
        acc = T.alloc_local((1,), "float32")
        acc[0] = T.float32(0)
        for k in T.serial(iters):
            h = T.Cast("float32", X[row, k * THREADS + tx]) + T.Cast("float32", R[row, k * THREADS + tx])
            H[row, k * THREADS + tx] = T.Cast("bfloat16", h)
            acc[0] = acc[0] + h * h
        total = T.cuda.cta_sum(acc[0], THREADS // 32, scratch.ptr_to([0]))
        rstd = T.rsqrt(total / T.float32(hidden) + T.float32(EPS))
        for k in T.serial(iters):
            h2 = T.Cast("float32", X[row, k * THREADS + tx]) + T.Cast("float32", R[row, k * THREADS + tx])
            Y[row, k * THREADS + tx] = T.Cast("bfloat16", h2 * rstd * T.Cast("float32", W[k * THREADS + tx]))

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": fused_add_rmsnorm}), target=target, tir_pipeline="tirx")


def solve(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor):
    tokens, hidden = x.shape
    if hidden % THREADS != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {THREADS}")
    if x.dtype != torch.bfloat16 or residual.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 inputs")
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = _build(tokens, hidden)["main"]
    x = x.contiguous()
    residual = residual.contiguous()
    weight = weight.contiguous()
    out = torch.empty_like(x)
    h = torch.empty_like(x)
    _compiled[key](x, residual, weight, out, h)
    return out, h
