"""GPU (sm_90a) TIRx solution: one CTA of 256 threads per token row. Pass 1: each thread takes the absmax of its
strided elements of x / smooth (fp32, smoothing factors read coalesced), then a CTA-wide max through shared
memory; pass 2 recomputes x / smooth, divides by scale = max(amax, 1e-6) / 127, rounds to nearest (rint) and
clamps to [-127, 127] as int8. Divisions are IEEE __fdiv_rn (TVM compiles CUDA with --use_fast_math)."""
import torch
import tvm
from tvm.script import tirx as T

INT8_MAX = 127.0
AMAX_FLOOR = 1e-6
THREADS = 256
_compiled = {}


def _build(tokens: int, hidden: int):
    iters = hidden // THREADS

    @T.prim_func
    def smoothquant_int8(x_ptr: T.handle, sm_ptr: T.handle, q_ptr: T.handle, s_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        SM = T.match_buffer(sm_ptr, (hidden,), "float32")
        Q = T.match_buffer(q_ptr, (tokens, hidden), "int8")
        S = T.match_buffer(s_ptr, (tokens, 1), "float32")
        T.device_entry()
        row = T.cta_id([tokens])
        tx = T.thread_id([THREADS])
        scratch = T.alloc_shared((THREADS // 32,), "float32")
        amax = T.alloc_local((1,), "float32")
        amax[0] = T.float32(0)
        for k in T.serial(iters):
            j = k * THREADS + tx
            xs = T.call_pure_extern("float32", "__fdiv_rn", T.Cast("float32", X[row, j]), SM[j])
            amax[0] = T.max(amax[0], T.abs(xs))
        total = T.cuda.cta_max(amax[0], THREADS // 32, scratch.ptr_to([0]))
        scale = T.call_pure_extern("float32", "__fdiv_rn", T.max(total, T.float32(AMAX_FLOOR)), T.float32(INT8_MAX))
        if tx == 0:
            S[row, 0] = scale
        for k in T.serial(iters):
            j = k * THREADS + tx
            xs2 = T.call_pure_extern("float32", "__fdiv_rn", T.Cast("float32", X[row, j]), SM[j])
            v = T.nearbyint(T.call_pure_extern("float32", "__fdiv_rn", xs2, scale))
            Q[row, j] = T.Cast("int8", T.min(T.max(v, T.float32(-INT8_MAX)), T.float32(INT8_MAX)))

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": smoothquant_int8}), target=target, tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor, smooth: torch.Tensor):
    tokens, hidden = x.shape
    if hidden % THREADS != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {THREADS}")
    if x.dtype != torch.bfloat16 or smooth.dtype != torch.float32:
        raise ValueError("expects bfloat16 x and float32 smooth")
    if tuple(smooth.shape) != (hidden,):
        raise ValueError(f"smooth must be ({hidden},), got {tuple(smooth.shape)}")
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    q = torch.empty((tokens, hidden), dtype=torch.int8, device=x.device)
    scale = torch.empty((tokens, 1), dtype=torch.float32, device=x.device)
    _compiled[key](x.contiguous(), smooth.contiguous(), q, scale)
    return q, scale
