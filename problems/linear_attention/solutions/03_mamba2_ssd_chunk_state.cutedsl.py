"""GPU (sm_90a) CuTe DSL solution: one CTA per (head, chunk, batch), one thread per state column n (DSTATE
threads), each holding its column of the (HEADDIM, DSTATE) state tile in HEADDIM float32 registers. For each
position l of the chunk, w = dt[l] * exp(dA_cumsum[last] - dA_cumsum[l]) (CTA-uniform, exp in float64) weights
x[l, :] (warp-uniform broadcasts) and every thread adds (x[l, p] * w) * B[l, n] for all p (B[l, :] read coalesced).
The tile is written once at the end, coalesced along n."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

_compiled = {}


def _make_kernel(headdim: int, chunk: int, heads_per_group: int):
    @cute.kernel
    def chunk_state_kernel(gX: cute.Tensor, gB: cute.Tensor, gDT: cute.Tensor, gDA: cute.Tensor, gS: cute.Tensor):
        n, _, _ = cute.arch.thread_idx()
        h, c, b = cute.arch.block_idx()
        g = h // heads_per_group
        acc = cute.make_rmem_tensor(headdim, cutlass.Float32)
        for p in cutlass.range_constexpr(headdim):
            acc[p] = cutlass.Float32(0.0)
        da_last = gDA[b, h, c, chunk - 1]
        for l in range(chunk):
            arg = (da_last - gDA[b, h, c, l]).to(cutlass.Float64)
            w = cute.math.exp(arg).to(cutlass.Float32) * gDT[b, h, c, l]
            t = c * chunk + l
            bn = gB[b, t, g, n].to(cutlass.Float32)
            for p in cutlass.range_constexpr(headdim):
                acc[p] = acc[p] + (gX[b, t, h, p].to(cutlass.Float32) * w) * bn
        for p in cutlass.range_constexpr(headdim):
            gS[b, c, h, p, n] = acc[p]

    @cute.jit
    def chunk_state(mX: cute.Tensor, mB: cute.Tensor, mDT: cute.Tensor, mDA: cute.Tensor, mS: cute.Tensor):
        chunk_state_kernel(mX, mB, mDT, mDA, mS).launch(
            grid=(mX.shape[2], mDT.shape[2], mX.shape[0]), block=(mB.shape[3], 1, 1))

    return chunk_state


def solve(x: torch.Tensor, B: torch.Tensor, dt: torch.Tensor, dA_cumsum: torch.Tensor):
    batch, seqlen, nheads, headdim = x.shape
    ngroups, dstate = B.shape[2], B.shape[3]
    nchunks, chunk = dt.shape[2], dt.shape[3]
    if x.dtype != torch.bfloat16 or B.dtype != torch.bfloat16:
        raise ValueError("x and B must be bfloat16")
    if dt.dtype != torch.float32 or dA_cumsum.dtype != torch.float32 or dA_cumsum.shape != dt.shape:
        raise ValueError("dt and dA_cumsum must be float32 (BATCH, NHEADS, NCHUNKS, CHUNK)")
    if nchunks * chunk != seqlen or nheads % ngroups != 0 or tuple(B.shape[:2]) != (batch, seqlen):
        raise ValueError("SEQLEN must be NCHUNKS * CHUNK, NHEADS a multiple of NGROUPS, B (BATCH, SEQLEN, ...)")
    if dstate % 32 != 0 or dstate > 1024 or headdim > 128:
        raise ValueError("DSTATE must be a multiple of 32 (<= 1024) and HEADDIM <= 128 (registers per thread)")
    x, B, dt, dA_cumsum = x.contiguous(), B.contiguous(), dt.contiguous(), dA_cumsum.contiguous()
    states = torch.empty((batch, nchunks, nheads, headdim, dstate), dtype=torch.float32, device=x.device)
    args = [from_dlpack(t) for t in (x, B, dt, dA_cumsum, states)]
    key = (batch, seqlen, nheads, headdim, ngroups, dstate, chunk)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(headdim, chunk, nheads // ngroups), *args)
    _compiled[key](*args)
    return states
