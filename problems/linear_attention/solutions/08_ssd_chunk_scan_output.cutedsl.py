"""GPU (sm_90a) CuTe DSL solution, two kernels launched by one jit function. cb: one CTA of 256 threads per (chunk,
batch, group) computes the causal C B^T matrix cb[l, s] = C_l . B_s (s <= l, 0 above; float32) into a scratch
buffer, shared by the group's heads. scan: one CTA of HEADDIM threads per (head, chunk, batch); thread p keeps the
carried state row states[c, h, p, :] (DSTATE float32) in registers. For each tile of LT = 32 rows the threads fill
the decayed weights W[l, s] = cb[l, s] exp(dA_cumsum[l] - dA_cumsum[s]) dt[s] (the segsum mask; exp in float64)
into shared memory, then thread p writes y[l, p] = sum_{s <= l} W[l, s] x[s, p] (x reads coalesced along p)
+ exp(dA_cumsum[l]) (C_l . state_p) (C reads warp-uniform) + D[h] x[l, p], rounded once to bf16."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

LT = 32            # rows of the decayed-weight tile
CB_THREADS = 256
_compiled = {}


def _make(nheads: int, ngroups: int, headdim: int, dstate: int, chunk: int):
    rep = nheads // ngroups
    cb_iters = (chunk * chunk + CB_THREADS - 1) // CB_THREADS
    w_iters = (LT * chunk + headdim - 1) // headdim

    @cute.kernel
    def cb_kernel(gB: cute.Tensor, gC: cute.Tensor, gCB: cute.Tensor):
        tx, _, _ = cute.arch.thread_idx()
        c, b, g = cute.arch.block_idx()
        for it in range(cb_iters):
            e = it * CB_THREADS + tx
            if e < chunk * chunk:
                l = e // chunk
                s = e % chunk
                acc = cutlass.Float32(0.0)
                if s <= l:
                    for n in range(dstate):
                        acc = acc + gC[b, c * chunk + l, g, n].to(cutlass.Float32) \
                            * gB[b, c * chunk + s, g, n].to(cutlass.Float32)
                gCB[b, c, g, l, s] = acc

    @cute.kernel
    def scan_kernel(gX: cute.Tensor, gC: cute.Tensor, gDT: cute.Tensor, gDA: cute.Tensor, gST: cute.Tensor,
                    gD: cute.Tensor, gCB: cute.Tensor, gY: cute.Tensor):
        p, _, _ = cute.arch.thread_idx()
        h, c, b = cute.arch.block_idx()
        smem = cutlass.memory.SmemAllocator()
        W = smem.allocate_tensor(cutlass.Float32, cute.make_layout(LT * chunk))
        st = cute.make_rmem_tensor(dstate, cutlass.Float32)
        g = h // rep
        for n in cutlass.range_constexpr(dstate):
            st[n] = gST[b, c, h, p, n]
        dval = gD[h]
        for lt in range(chunk // LT):
            cute.arch.sync_threads()            # the previous tile's readers of W are done
            for it in range(w_iters):
                e = it * headdim + p
                if e < LT * chunk:
                    r = e // chunk
                    s = e % chunk
                    wv = cutlass.Float32(0.0)
                    if s <= lt * LT + r:
                        arg = (gDA[b, h, c, lt * LT + r] - gDA[b, h, c, s]).to(cutlass.Float64)
                        wv = gCB[b, c, g, lt * LT + r, s] * cute.math.exp(arg).to(cutlass.Float32) * gDT[b, h, c, s]
                    W[e] = wv
            cute.arch.sync_threads()
            for r in range(LT):
                l = lt * LT + r
                intra = cutlass.Float32(0.0)
                for s in range(l + 1):
                    intra = intra + W[r * chunk + s] * gX[b, c * chunk + s, h, p].to(cutlass.Float32)
                inter = cutlass.Float32(0.0)
                for n in cutlass.range_constexpr(dstate):
                    inter = inter + gC[b, c * chunk + l, g, n].to(cutlass.Float32) * st[n]
                decay = cute.math.exp(gDA[b, h, c, l].to(cutlass.Float64)).to(cutlass.Float32)
                yv = intra + decay * inter + dval * gX[b, c * chunk + l, h, p].to(cutlass.Float32)
                gY[b, c * chunk + l, h, p] = yv.to(cutlass.BFloat16)

    @cute.jit
    def ssd_chunk_scan(mX: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, mDT: cute.Tensor, mDA: cute.Tensor,
                       mST: cute.Tensor, mD: cute.Tensor, mCB: cute.Tensor, mY: cute.Tensor):
        cb_kernel(mB, mC, mCB).launch(grid=(mCB.shape[1], mCB.shape[0], ngroups), block=(CB_THREADS, 1, 1))
        scan_kernel(mX, mC, mDT, mDA, mST, mD, mCB, mY).launch(grid=(nheads, mCB.shape[1], mCB.shape[0]),
                                                               block=(headdim, 1, 1))

    return ssd_chunk_scan


def solve(x, B, C, dt, dA_cumsum, states, D):
    batch, seqlen, nheads, headdim = x.shape
    ngroups, dstate = B.shape[2], B.shape[3]
    nchunks, chunk = dt.shape[2], dt.shape[3]
    if x.dtype != torch.bfloat16 or B.dtype != torch.bfloat16 or C.dtype != torch.bfloat16:
        raise ValueError("x, B and C must be bfloat16")
    if dt.dtype != torch.float32 or dA_cumsum.dtype != torch.float32 or states.dtype != torch.float32 \
            or D.dtype != torch.float32:
        raise ValueError("dt, dA_cumsum, states and D must be float32")
    if nchunks * chunk != seqlen or nheads % ngroups != 0 or C.shape != B.shape or dA_cumsum.shape != dt.shape \
            or tuple(states.shape) != (batch, nchunks, nheads, headdim, dstate):
        raise ValueError("inconsistent shapes (see the problem's reference for the layout)")
    if chunk % LT != 0 or headdim > 1024 or dstate > 256 or LT * chunk * 4 > 48 * 1024:
        raise ValueError(f"needs CHUNK % {LT} == 0 (and {LT} x CHUNK fp32 in 48 KiB of shared memory), "
                         f"HEADDIM <= 1024 threads, DSTATE <= 256 registers")
    tensors = [t.contiguous() for t in (x, B, C, dt, dA_cumsum, states, D)]
    cb = torch.empty((batch, nchunks, ngroups, chunk, chunk), dtype=torch.float32, device=x.device)
    y = torch.empty((batch, seqlen, nheads, headdim), dtype=torch.bfloat16, device=x.device)
    args = [from_dlpack(t) for t in (*tensors, cb, y)]
    key = (batch, seqlen, nheads, headdim, ngroups, dstate, chunk)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make(nheads, ngroups, headdim, dstate, chunk), *args)
    _compiled[key](*args)
    return y
