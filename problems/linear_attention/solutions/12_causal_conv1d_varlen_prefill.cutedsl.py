"""GPU (sm_90a) CuTe DSL solution: one launch over a (channel block, token) grid of 128-thread CTAs, one thread
per (token, channel). Every thread scans cu_seqlens for its token's sequence (start, end, index b), sums the WIDTH
taps over x[t - (WIDTH-1) + w] with taps before the sequence start reading 0, adds the bias and applies SiLU (reads
and writes coalesced along channels). A token among its sequence's last WIDTH-1 writes its input into the final
conv state slot (WIDTH-1) - (end - t); a sequence's first token zero-fills the slots a too-short sequence cannot
reach, so the states come out of the same launch."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

THREADS = 128
_compiled = {}


def _make_kernel(batch: int, width: int):
    @cute.kernel
    def conv_kernel(gX: cute.Tensor, gW: cute.Tensor, gB: cute.Tensor, gCU: cute.Tensor, gY: cute.Tensor,
                    gST: cute.Tensor):
        tx, _, _ = cute.arch.thread_idx()
        c, t, _ = cute.arch.block_idx()
        d = c * THREADS + tx
        b = cutlass.Int32(0)
        for i in cutlass.range_constexpr(batch):
            if gCU[i] <= t:
                b = cutlass.Int32(i)
        start = gCU[b]
        end = gCU[b + 1]
        acc = gB[d].to(cutlass.Float32)
        for w in cutlass.range_constexpr(width):
            src = t - (width - 1) + w
            if src >= start:
                acc = acc + gX[src, d].to(cutlass.Float32) * gW[d, w].to(cutlass.Float32)
        gY[t, d] = (acc / (cutlass.Float32(1.0) + cute.math.exp(-acc))).to(cutlass.BFloat16)
        if end - t <= width - 1:
            gST[b, (width - 1) - (end - t), d] = gX[t, d]
        if t == start:
            for r in cutlass.range_constexpr(width - 1):
                if r < (width - 1) - (end - start):
                    gST[b, r, d] = cutlass.BFloat16(0.0)

    @cute.jit
    def conv(mX: cute.Tensor, mW: cute.Tensor, mB: cute.Tensor, mCU: cute.Tensor, mY: cute.Tensor,
             mST: cute.Tensor):
        total, dim = mX.shape
        conv_kernel(mX, mW, mB, mCU, mY, mST).launch(grid=(dim // THREADS, total, 1), block=(THREADS, 1, 1))

    return conv


def solve(x, weight, bias, cu_seqlens):
    total, dim = x.shape
    width = weight.shape[1]
    batch = cu_seqlens.shape[0] - 1
    if x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16 or bias.dtype != torch.bfloat16:
        raise ValueError("x, weight and bias must be bfloat16")
    if tuple(weight.shape) != (dim, width) or tuple(bias.shape) != (dim,) or width < 2:
        raise ValueError("weight must be (DIM, WIDTH) with WIDTH >= 2 and bias (DIM,)")
    if cu_seqlens.dtype != torch.int32:
        raise ValueError("cu_seqlens must be int32")
    if dim % THREADS != 0:
        raise ValueError(f"DIM={dim} must be a multiple of {THREADS}")
    ins = [t.contiguous() for t in (x, weight, bias, cu_seqlens)]
    y = torch.empty((total, dim), dtype=x.dtype, device=x.device)
    states = torch.empty((batch, width - 1, dim), dtype=x.dtype, device=x.device)
    args = [from_dlpack(t) for t in (*ins, y, states)]
    key = (total, batch, dim, width)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(batch, width), *args)
    _compiled[key](*args)
    return y, states
