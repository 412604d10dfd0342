"""CuTe DSL (sm_90a) solution: one CTA of 128 threads per output column n (one row of W_down), so the weight is
read from HBM once for the whole batch. Thread tidx walks k = tidx, tidx + 128, ... (coalesced weight and h loads;
h, 1.8 MB, stays in L2), loads W[n, k] once and accumulates W[n, k] * h[m, k] into an fp32 register tensor holding
all tokens m. Each token's partials are summed by a warp shuffle, then across the 4 warps through shared memory,
and thread m writes the epilogue out[m, n] = bf16(residual[m, n] + sum)."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

THREADS = 128
NUM_WARPS = THREADS // 32
MAX_TOKENS = THREADS  # one epilogue thread per token
_compiled = {}


def _make_kernel(tokens: int, inter: int):
    iters = inter // THREADS

    @cute.kernel
    def gemm_kernel(gH: cute.Tensor, gW: cute.Tensor, gR: cute.Tensor, gO: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        n, _, _ = cute.arch.block_idx()
        warp = tidx // 32
        lane = tidx % 32
        smem = cutlass.memory.SmemAllocator()
        part = smem.allocate_tensor(cutlass.Float32, cute.make_layout((NUM_WARPS, tokens), stride=(tokens, 1)))
        acc = cute.make_rmem_tensor(tokens, cutlass.Float32)
        for m in cutlass.range_constexpr(tokens):
            acc[m] = cutlass.Float32(0.0)
        for it in range(iters):
            k = it * THREADS + tidx
            wv = gW[n, k].to(cutlass.Float32)
            for m in cutlass.range_constexpr(tokens):
                acc[m] = acc[m] + wv * gH[m, k].to(cutlass.Float32)
        for m in cutlass.range_constexpr(tokens):
            s = cute.arch.warp_reduction_sum(acc[m])
            if lane == 0:
                part[warp, m] = s
        cute.arch.sync_threads()
        if tidx < tokens:
            tot = cutlass.Float32(0.0)
            for w in cutlass.range_constexpr(NUM_WARPS):
                tot = tot + part[w, tidx]
            gO[tidx, n] = (gR[tidx, n].to(cutlass.Float32) + tot).to(gO.element_type)

    @cute.jit
    def gemm(mH: cute.Tensor, mW: cute.Tensor, mR: cute.Tensor, mO: cute.Tensor):
        gemm_kernel(mH, mW, mR, mO).launch(grid=(mW.shape[0], 1, 1), block=(THREADS, 1, 1))

    return gemm


def solve(h: torch.Tensor, w_down: torch.Tensor, residual: torch.Tensor):
    tokens, inter = h.shape
    hidden = w_down.shape[0]
    if h.dtype != torch.bfloat16 or w_down.dtype != torch.bfloat16 or residual.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 h, w_down and residual")
    if tuple(w_down.shape) != (hidden, inter) or tuple(residual.shape) != (tokens, hidden):
        raise ValueError("w_down must be (HIDDEN, INTERMEDIATE) and residual (TOKENS, HIDDEN)")
    if inter % THREADS != 0 or tokens > MAX_TOKENS:
        raise ValueError(f"INTERMEDIATE={inter} must be a multiple of {THREADS} and TOKENS <= {MAX_TOKENS}")
    out = torch.empty_like(residual)
    args = [from_dlpack(t) for t in (h.contiguous(), w_down.contiguous(), residual.contiguous(), out)]
    key = (tokens, inter, hidden)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(tokens, inter), *args)
    _compiled[key](*args)
    return out
