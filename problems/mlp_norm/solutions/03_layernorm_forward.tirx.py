"""TIRx (sm_90a) solution: one CTA of 256 threads per token row. Pass 1 sums x (CTA-wide sum: warp shuffles, then
shared memory) for the mean; pass 2 sums the squared deviations from that mean (two-pass variance, each on its own
shared scratch so the two reductions cannot race); pass 3 writes (x - mean) * rstd * weight + bias in fp32,
rounded once to bf16."""
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-5
THREADS = 256
NUM_WARPS = THREADS // 32
_compiled = {}


def _build(tokens: int, hidden: int):
    iters = hidden // THREADS

    @T.prim_func
    def layernorm(x_ptr: T.handle, w_ptr: T.handle, b_ptr: T.handle, y_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        W = T.match_buffer(w_ptr, (hidden,), "bfloat16")
        B = T.match_buffer(b_ptr, (hidden,), "bfloat16")
        Y = T.match_buffer(y_ptr, (tokens, hidden), "bfloat16")
        T.device_entry()
        row = T.cta_id([tokens])
        tx = T.thread_id([THREADS])
        scratch = T.alloc_shared((2 * NUM_WARPS,), "float32")
        acc = T.alloc_local((1,), "float32")
        stat = T.alloc_local((2,), "float32")  # 0: mean, 1: rstd
        acc[0] = T.float32(0)
        for k in T.serial(iters):
            acc[0] = acc[0] + T.Cast("float32", X[row, k * THREADS + tx])
        stat[0] = T.cuda.cta_sum(acc[0], NUM_WARPS, scratch.ptr_to([0])) / T.float32(hidden)
        acc[0] = T.float32(0)
        for k in T.serial(iters):
            d = T.Cast("float32", X[row, k * THREADS + tx]) - stat[0]
            acc[0] = acc[0] + d * d
        stat[1] = T.rsqrt(T.cuda.cta_sum(acc[0], NUM_WARPS, scratch.ptr_to([NUM_WARPS])) / T.float32(hidden)
                          + T.float32(EPS))
        for k in T.serial(iters):
            j = k * THREADS + tx
            y = (T.Cast("float32", X[row, j]) - stat[0]) * stat[1] * T.Cast("float32", W[j]) + T.Cast("float32", B[j])
            Y[row, j] = T.Cast("bfloat16", y)

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": layernorm}), target=target, tir_pipeline="tirx")


def solve(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
    tokens, hidden = x.shape
    if hidden % THREADS != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {THREADS}")
    if x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16 or bias.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 x, weight and bias")
    if weight.shape != (hidden,) or bias.shape != (hidden,):
        raise ValueError(f"weight and bias must have shape ({hidden},)")
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = _build(tokens, hidden)["main"]
    x = x.contiguous()
    out = torch.empty_like(x)
    _compiled[key](x, weight.contiguous(), bias.contiguous(), out)
    return out
