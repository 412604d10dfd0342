"""GPU (sm_90a) CuTe DSL solution: one CTA of 256 threads per token row; thread tidx owns elements tidx,
tidx + 256, ... held in registers. Pass 1: the sum of x^2 in float64 (per-thread partials, then every thread adds the 256
partials from shared memory in the same order), so rstd, rounded once to float32, is as exact as the scale
output's tight bound needs; pass 2: y = x * rstd * weight (float32) and a CTA-wide amax; pass 3: y / scale with scale = max(amax, 1e-4) /
448, clamped and converted to e4m3fn (cvt.rn.satfinite)."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

EPS = 1e-5
FP8_MAX = 448.0
AMAX_FLOOR = 1e-4
THREADS = 256
NUM_WARPS = THREADS // 32
_compiled = {}


def _make_kernel(iters: int):
    @cute.kernel
    def rmsnorm_quant_kernel(gX: cute.Tensor, gW: cute.Tensor, gQ: cute.Tensor, gS: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        row, _, _ = cute.arch.block_idx()
        warp = tidx // 32
        lane = tidx % 32
        smem = cutlass.memory.SmemAllocator()
        partial = smem.allocate_tensor(cutlass.Float64, cute.make_layout(THREADS))
        red_max = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS))
        y = cute.make_rmem_tensor(iters, cutlass.Float32)

        ssq = cutlass.Float64(0.0)
        for k in cutlass.range_constexpr(iters):
            y[k] = gX[row, k * THREADS + tidx].to(cutlass.Float32)
            ssq = ssq + y[k].to(cutlass.Float64) * y[k].to(cutlass.Float64)
        partial[tidx] = ssq
        cute.arch.sync_threads()
        total = cutlass.Float64(0.0)
        for t in range(THREADS):
            total = total + partial[t]
        mean = total / cutlass.Float64(iters * THREADS) + cutlass.Float64(EPS)
        rstd = (cutlass.Float64(1.0) / cute.math.sqrt(mean)).to(cutlass.Float32)

        amax = cutlass.Float32(0.0)
        for k in cutlass.range_constexpr(iters):
            y[k] = y[k] * rstd * gW[k * THREADS + tidx].to(cutlass.Float32)
            amax = cute.arch.fmax(amax, cute.math.absf(y[k]))
        amax = cute.arch.warp_reduction_max(amax)
        if lane == 0:
            red_max[warp] = amax
        cute.arch.sync_threads()
        row_max = red_max[0]
        for w in cutlass.range_constexpr(1, NUM_WARPS):
            row_max = cute.arch.fmax(row_max, red_max[w])
        scale = cute.arch.fmax(row_max, cutlass.Float32(AMAX_FLOOR)) / cutlass.Float32(FP8_MAX)
        if tidx == 0:
            gS[row, 0] = scale
        for k in cutlass.range_constexpr(iters):
            v = y[k] / scale
            v = cute.arch.fmin(cute.arch.fmax(v, cutlass.Float32(-FP8_MAX)), cutlass.Float32(FP8_MAX))
            gQ[row, k * THREADS + tidx] = v.to(cutlass.Float8E4M3FN)

    @cute.jit
    def rmsnorm_quant(mX: cute.Tensor, mW: cute.Tensor, mQ: cute.Tensor, mS: cute.Tensor):
        rmsnorm_quant_kernel(mX, mW, mQ, mS).launch(grid=(mX.shape[0], 1, 1), block=(THREADS, 1, 1))

    return rmsnorm_quant


def solve(x: torch.Tensor, weight: torch.Tensor):
    tokens, hidden = x.shape
    if x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16 or tuple(weight.shape) != (hidden,):
        raise ValueError("expects bfloat16 x (TOKENS, HIDDEN) and weight (HIDDEN,)")
    if hidden % THREADS != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {THREADS}")
    x, weight = x.contiguous(), weight.contiguous()
    q = torch.empty((tokens, hidden), dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((tokens, 1), dtype=torch.float32, device=x.device)
    args = [from_dlpack(t) for t in (x, weight, q, scale)]
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(hidden // THREADS), *args)
    _compiled[key](*args)
    return q, scale
