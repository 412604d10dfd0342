"""CuTe DSL (sm_90a) solution: one jit function launching two kernels, atomic-free.
rows: one CTA of 256 threads per token row; thread tidx holds elements tidx, tidx + 256, ... in an fp32 register
tensor. The sums of x and x^2 are taken in float64 (exact for bf16 inputs; per-thread partials in shared memory,
added by every thread in the same order), so mean and rstd, each rounded once to float32, are as exact as the amax
output's tight bound needs. Then y = (x - mean) * rstd * weight + bias in fp32,
q = e4m3fn(clamp(y * scale, -448, 448)) (cvt.rn.satfinite), and the CTA max of |y| (warp shuffles, one shared
slot per warp) is stored as the row's amax, taken from the y values already in registers.
fold: one CTA folds the TOKENS row maxima into the new history entry 0 and shifts the rest of the history by one."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

EPS = 1e-5
FP8_MAX = 448.0
THREADS = 256
NUM_WARPS = THREADS // 32
_compiled = {}


def _make_kernels(iters: int):
    @cute.kernel
    def rows_kernel(gX: cute.Tensor, gW: cute.Tensor, gB: cute.Tensor, gS: cute.Tensor, gQ: cute.Tensor,
                    gR: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        row, _, _ = cute.arch.block_idx()
        warp = tidx // 32
        lane = tidx % 32
        smem = cutlass.memory.SmemAllocator()
        p_sum = smem.allocate_tensor(cutlass.Float64, cute.make_layout(THREADS))
        p_sq = smem.allocate_tensor(cutlass.Float64, cute.make_layout(THREADS))
        red_max = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS))
        xv = cute.make_rmem_tensor(iters, cutlass.Float32)

        s1 = cutlass.Float64(0.0)
        s2 = cutlass.Float64(0.0)
        for k in cutlass.range_constexpr(iters):
            xv[k] = gX[row, k * THREADS + tidx].to(cutlass.Float32)
            xd = xv[k].to(cutlass.Float64)
            s1 = s1 + xd
            s2 = s2 + xd * xd
        p_sum[tidx] = s1
        p_sq[tidx] = s2
        cute.arch.sync_threads()
        t1 = cutlass.Float64(0.0)
        t2 = cutlass.Float64(0.0)
        for t in range(THREADS):
            t1 = t1 + p_sum[t]
            t2 = t2 + p_sq[t]
        mean64 = t1 / cutlass.Float64(iters * THREADS)
        var64 = t2 / cutlass.Float64(iters * THREADS) - mean64 * mean64
        if var64 < cutlass.Float64(0.0):
            var64 = cutlass.Float64(0.0)
        mean = mean64.to(cutlass.Float32)
        rstd = (cutlass.Float64(1.0) / cute.math.sqrt(var64 + cutlass.Float64(EPS))).to(cutlass.Float32)

        scale = gS[0]
        amax = cutlass.Float32(0.0)
        for k in cutlass.range_constexpr(iters):
            j = k * THREADS + tidx
            y = (xv[k] - mean) * rstd * gW[j].to(cutlass.Float32) + gB[j].to(cutlass.Float32)
            amax = cute.arch.fmax(amax, cute.math.absf(y))
            v = cute.arch.fmin(cute.arch.fmax(y * scale, cutlass.Float32(-FP8_MAX)), cutlass.Float32(FP8_MAX))
            gQ[row, j] = v.to(cutlass.Float8E4M3FN)
        amax = cute.arch.warp_reduction_max(amax)
        if lane == 0:
            red_max[warp] = amax
        cute.arch.sync_threads()
        if tidx == 0:
            row_max = red_max[0]
            for w in cutlass.range_constexpr(1, NUM_WARPS):
                row_max = cute.arch.fmax(row_max, red_max[w])
            gR[row] = row_max

    @cute.kernel
    def fold_kernel(gR: cute.Tensor, gH: cute.Tensor, gN: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        warp = tidx // 32
        lane = tidx % 32
        tokens = gR.shape[0]
        history = gH.shape[0]
        smem = cutlass.memory.SmemAllocator()
        red_max = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS))
        m = cutlass.Float32(0.0)
        for c in range((tokens + THREADS - 1) // THREADS):
            i = c * THREADS + tidx
            if i < tokens:
                m = cute.arch.fmax(m, gR[i])
        m = cute.arch.warp_reduction_max(m)
        if lane == 0:
            red_max[warp] = m
        cute.arch.sync_threads()
        if tidx == 0:
            total = red_max[0]
            for w in cutlass.range_constexpr(1, NUM_WARPS):
                total = cute.arch.fmax(total, red_max[w])
            gN[0] = total
        for c in range((history + THREADS - 1) // THREADS):
            k = c * THREADS + tidx
            if k + 1 < history:
                gN[k + 1] = gH[k]

    @cute.jit
    def layernorm_fp8(mX: cute.Tensor, mW: cute.Tensor, mB: cute.Tensor, mS: cute.Tensor, mQ: cute.Tensor,
                      mR: cute.Tensor, mH: cute.Tensor, mN: cute.Tensor):
        rows_kernel(mX, mW, mB, mS, mQ, mR).launch(grid=(mX.shape[0], 1, 1), block=(THREADS, 1, 1))
        fold_kernel(mR, mH, mN).launch(grid=(1, 1, 1), block=(THREADS, 1, 1))

    return layernorm_fp8


def solve(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, scale: torch.Tensor,
          amax_history: torch.Tensor):
    tokens, hidden = x.shape
    history = amax_history.shape[0]
    if x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16 or bias.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 x, weight and bias")
    if scale.dtype != torch.float32 or scale.numel() != 1:
        raise ValueError("scale must be a single float32 value")
    if amax_history.dtype != torch.float32 or amax_history.dim() != 1 or history < 2:
        raise ValueError("amax_history must be a float32 vector of at least 2 entries")
    if tuple(weight.shape) != (hidden,) or tuple(bias.shape) != (hidden,):
        raise ValueError("weight and bias must be (HIDDEN,)")
    if hidden % THREADS != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {THREADS}")
    q = torch.empty((tokens, hidden), dtype=torch.float8_e4m3fn, device=x.device)
    row_amax = torch.empty(tokens, dtype=torch.float32, device=x.device)
    new_history = torch.empty_like(amax_history)
    args = [from_dlpack(t) for t in (x.contiguous(), weight.contiguous(), bias.contiguous(),
                                     scale.reshape(1).contiguous(), q, row_amax, amax_history.contiguous(),
                                     new_history)]
    key = (tokens, hidden, history)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernels(hidden // THREADS), *args)
    _compiled[key](*args)
    return q, new_history
