"""GPU (sm_90a) CuTe DSL solution: one CTA of 64 threads per (value head, batch, 64-wide slice of DV) walks the
chunks of 64 in order; thread t owns state column jv = slice * 64 + t, its DK float32 values in registers, starting
from the cached state. Per chunk: thread 0 takes the within-chunk cumsum G of g (float64) into shared memory, the
threads fill e^G and e^(G_last - G), then split the causal C x C matrices L[i, j] = beta_i e^(G_i - G_j)
(k_i . k_j) (j < i) and P[i, j] = e^(G_i - G_j) (q_i . k_j) (j <= i) into shared memory (float32, dots in
float64). Then each thread, for its column only (the WY form makes the columns independent):
r_i = beta_i (v_i[jv] - e^(G_i) (k_i . S[:, jv])) and u = (I + L)^-1 r by forward substitution (float64),
o_i[jv] = DK**-0.5 (e^(G_i) (q_i . S[:, jv]) + sum_{m <= i} P[i, m] u_m), then
S[:, jv] <- e^(G_last) S[:, jv] + sum_i e^(G_last - G_i) k_i u_i. k and q reads are warp-uniform broadcasts, v reads
and o writes coalesced; the state is written once at the end."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

DVT = 64           # state columns (threads) per CTA
CHUNK = 64
_compiled = {}


def _make(seqlen: int, rep: int, dk: int, chunk: int):
    nchunks = seqlen // chunk
    scale = dk ** -0.5
    pair_iters = (chunk * chunk + DVT - 1) // DVT
    row_iters = (chunk + DVT - 1) // DVT

    @cute.kernel
    def gdr_kernel(gQ: cute.Tensor, gK: cute.Tensor, gV: cute.Tensor, gG: cute.Tensor, gB: cute.Tensor,
                   gH0: cute.Tensor, gO: cute.Tensor, gS: cute.Tensor):
        tx, _, _ = cute.arch.thread_idx()
        h, b, js = cute.arch.block_idx()
        smem = cutlass.memory.SmemAllocator()
        Gs = smem.allocate_tensor(cutlass.Float64, cute.make_layout(chunk))
        eG = smem.allocate_tensor(cutlass.Float64, cute.make_layout(chunk))
        eL = smem.allocate_tensor(cutlass.Float64, cute.make_layout(chunk))
        Bs = smem.allocate_tensor(cutlass.Float64, cute.make_layout(chunk))
        L = smem.allocate_tensor(cutlass.Float32, cute.make_layout(chunk * chunk))
        P = smem.allocate_tensor(cutlass.Float32, cute.make_layout(chunk * chunk))
        col = cute.make_rmem_tensor(dk, cutlass.Float32)
        u = cute.make_rmem_tensor(chunk, cutlass.Float64)
        jv = js * DVT + tx
        kh = h // rep
        for d in cutlass.range_constexpr(dk):
            col[d] = gH0[b, h, d, jv]
        for c in range(nchunks):
            base = c * chunk
            cute.arch.sync_threads()            # the previous chunk's readers of the shared matrices are done
            if tx == 0:
                run = cutlass.Float64(0.0)
                for i in range(chunk):
                    run = run + gG[b, base + i, h].to(cutlass.Float64)
                    Gs[i] = run
            cute.arch.sync_threads()
            for it in range(row_iters):
                i = it * DVT + tx
                if i < chunk:
                    eG[i] = cute.math.exp(Gs[i])
                    eL[i] = cute.math.exp(Gs[chunk - 1] - Gs[i])
                    Bs[i] = gB[b, base + i, h].to(cutlass.Float64)
            for it in range(pair_iters):
                e = it * DVT + tx
                if e < chunk * chunk:
                    ti = e // chunk
                    tj = e % chunk
                    lv = cutlass.Float32(0.0)
                    pv = cutlass.Float32(0.0)
                    if tj <= ti:
                        kk = cutlass.Float64(0.0)
                        qk = cutlass.Float64(0.0)
                        for d in range(dk):
                            kj = gK[b, base + tj, kh, d].to(cutlass.Float64)
                            kk = kk + gK[b, base + ti, kh, d].to(cutlass.Float64) * kj
                            qk = qk + gQ[b, base + ti, kh, d].to(cutlass.Float64) * kj
                        dec = cute.math.exp(Gs[ti] - Gs[tj])
                        pv = (dec * qk).to(cutlass.Float32)
                        if tj < ti:
                            lv = (gB[b, base + ti, h].to(cutlass.Float64) * dec * kk).to(cutlass.Float32)
                    L[e] = lv
                    P[e] = pv
            cute.arch.sync_threads()
            for i in range(chunk):              # r, then forward substitution u = (I + L)^-1 r
                ks = cutlass.Float64(0.0)
                for d in cutlass.range_constexpr(dk):
                    ks = ks + gK[b, base + i, kh, d].to(cutlass.Float64) * col[d].to(cutlass.Float64)
                r = Bs[i] * (gV[b, base + i, h, jv].to(cutlass.Float64) - eG[i] * ks)
                for m in range(i):
                    r = r - L[i * chunk + m].to(cutlass.Float64) * u[m]
                u[i] = r
            for i in range(chunk):              # outputs, from the chunk's initial state
                qs = cutlass.Float64(0.0)
                for d in cutlass.range_constexpr(dk):
                    qs = qs + gQ[b, base + i, kh, d].to(cutlass.Float64) * col[d].to(cutlass.Float64)
                ov = eG[i] * qs
                for m in range(i + 1):
                    ov = ov + P[i * chunk + m].to(cutlass.Float64) * u[m]
                gO[b, base + i, h, jv] = (cutlass.Float64(scale) * ov).to(cutlass.Float32).to(cutlass.BFloat16)
            for d in cutlass.range_constexpr(dk):   # carry the state column to the next chunk
                kv = cutlass.Float64(0.0)
                for i in range(chunk):
                    kv = kv + eL[i] * gK[b, base + i, kh, d].to(cutlass.Float64) * u[i]
                col[d] = (eG[chunk - 1] * col[d].to(cutlass.Float64) + kv).to(cutlass.Float32)
        for d in cutlass.range_constexpr(dk):
            gS[b, h, d, jv] = col[d]

    @cute.jit
    def gdr(mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mG: cute.Tensor, mB: cute.Tensor,
            mH0: cute.Tensor, mO: cute.Tensor, mS: cute.Tensor):
        gdr_kernel(mQ, mK, mV, mG, mB, mH0, mO, mS).launch(
            grid=(mV.shape[2], mV.shape[0], mV.shape[3] // DVT), block=(DVT, 1, 1))

    return gdr


def solve(q, k, v, g, beta, initial_state):
    batch, seqlen, hk, dk = q.shape
    hv, dv = v.shape[2], v.shape[3]
    if q.dtype != torch.bfloat16 or k.dtype != torch.bfloat16 or v.dtype != torch.bfloat16 \
            or beta.dtype != torch.bfloat16:
        raise ValueError("q, k, v and beta must be bfloat16")
    if g.dtype != torch.float32 or initial_state.dtype != torch.float32:
        raise ValueError("g and initial_state must be float32")
    if k.shape != q.shape or tuple(v.shape[:2]) != (batch, seqlen) or hv % hk != 0 \
            or tuple(initial_state.shape) != (batch, hv, dk, dv):
        raise ValueError("expects q, k (B, T, HK, DK), v (B, T, HV, DV) with HV % HK == 0, state (B, HV, DK, DV)")
    if seqlen % CHUNK != 0 or dv % DVT != 0 or dk > 256:
        raise ValueError(f"needs SEQLEN % {CHUNK} == 0, HEAD_V_DIM % {DVT} == 0 and HEAD_K_DIM <= 256 "
                         f"(registers per thread); got {seqlen}, {dv}, {dk}")
    tensors = [t.contiguous() for t in (q, k, v, g, beta, initial_state)]
    o = torch.empty((batch, seqlen, hv, dv), dtype=torch.bfloat16, device=q.device)
    state = torch.empty((batch, hv, dk, dv), dtype=torch.float32, device=q.device)
    args = [from_dlpack(t) for t in (*tensors, o, state)]
    key = (batch, seqlen, hk, hv, dk, dv)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make(seqlen, hv // hk, dk, CHUNK), *args)
    _compiled[key](*args)
    return o, state
