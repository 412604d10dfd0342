"""GPU (sm_90a) TIRx solution: one CTA of 256 threads per token row; thread tx owns elements tx, tx + 256, ...
held in registers. Pass 1: the sum of x^2 in float64 (per-thread partials, then every thread adds the 256 partials
from shared memory in the same order), so rstd, rounded once to float32, is as exact as the scale output's tight
bound needs; pass 2: y = x * rstd * weight (float32) and a CTA-wide
amax; pass 3: y / scale with scale = max(amax, 1e-4) / 448 (IEEE division), clamped and cast to e4m3fn."""
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-5
FP8_MAX = 448.0
AMAX_FLOOR = 1e-4
THREADS = 256
_compiled = {}


def _build(tokens: int, hidden: int):
    iters = hidden // THREADS

    @T.prim_func
    def rmsnorm_fp8_quant(x_ptr: T.handle, w_ptr: T.handle, q_ptr: T.handle, s_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        W = T.match_buffer(w_ptr, (hidden,), "bfloat16")
        Q = T.match_buffer(q_ptr, (tokens, hidden), "float8_e4m3fn")
        S = T.match_buffer(s_ptr, (tokens, 1), "float32")
        T.device_entry()
        row = T.cta_id([tokens])
        tx = T.thread_id([THREADS])
        partial = T.alloc_shared((THREADS,), "float64")
        scratch_max = T.alloc_shared((THREADS // 32,), "float32")
        y = T.alloc_local((iters,), "float32")
        acc = T.alloc_local((2,), "float32")  # 1: amax
        ssq = T.alloc_local((1,), "float64")
        ssq[0] = T.float64(0)
        for k in T.unroll(iters):
            y[k] = T.Cast("float32", X[row, k * THREADS + tx])
            ssq[0] = ssq[0] + T.Cast("float64", y[k]) * T.Cast("float64", y[k])
        partial[tx] = ssq[0]
        T.cuda.cta_sync()
        ssq[0] = T.float64(0)
        for t in T.serial(THREADS):
            ssq[0] = ssq[0] + partial[t]
        rstd = T.Cast("float32", T.float64(1) / T.sqrt(ssq[0] / T.float64(hidden) + T.float64(EPS)))
        acc[1] = T.float32(0)
        for k in T.unroll(iters):
            y[k] = y[k] * rstd * T.Cast("float32", W[k * THREADS + tx])
            acc[1] = T.max(acc[1], T.abs(y[k]))
        amax = T.cuda.cta_max(acc[1], THREADS // 32, scratch_max.ptr_to([0]))
        # __fdiv_rn: IEEE division (TVM builds with --use_fast_math, where '/' is approximate)
        scale = T.call_pure_extern("float32", "__fdiv_rn", T.max(amax, T.float32(AMAX_FLOOR)), T.float32(FP8_MAX))
        if tx == 0:
            S[row, 0] = scale
        for k in T.unroll(iters):
            v = T.call_pure_extern("float32", "__fdiv_rn", y[k], scale)
            Q[row, k * THREADS + tx] = T.Cast("float8_e4m3fn", T.min(T.max(v, T.float32(-FP8_MAX)), T.float32(FP8_MAX)))

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    module = tvm.IRModule({"main": rmsnorm_fp8_quant})
    return tvm.compile(module, target=target, tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor, weight: torch.Tensor):
    tokens, hidden = x.shape
    if x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16 or tuple(weight.shape) != (hidden,):
        raise ValueError("expects bfloat16 x (TOKENS, HIDDEN) and weight (HIDDEN,)")
    if hidden % THREADS != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {THREADS}")
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = _build(tokens, hidden)
    q = torch.empty((tokens, hidden), dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((tokens, 1), dtype=torch.float32, device=x.device)
    _compiled[key](x.contiguous(), weight.contiguous(), q, scale)
    return q, scale
