"""GPU (sm_90a) TIRx solution: one CTA of 64 threads per (value head, batch, 64-wide slice of DV) walks the chunks of
64 in order; thread t owns state column jv = slice * 64 + t, its DK float32 values in registers, starting from the
cached state. Per chunk: thread 0 takes the within-chunk cumsum G of g (float64) into shared memory, the threads
fill e^G and e^(G_last - G), then split the causal C x C matrices L[i, j] = beta_i e^(G_i - G_j) (k_i . k_j)
(j < i) and P[i, j] = e^(G_i - G_j) (q_i . k_j) (j <= i) into shared memory (float32, dots in float64). Then each
thread, for its column only (the WY form makes the columns independent): r_i = beta_i (v_i[jv] - e^(G_i)
(k_i . S[:, jv])) and u = (I + L)^-1 r by forward substitution (float64), o_i[jv] = DK**-0.5 (e^(G_i)
(q_i . S[:, jv]) + sum_{m <= i} P[i, m] u_m), then S[:, jv] <- e^(G_last) S[:, jv] + sum_i e^(G_last - G_i) k_i u_i.
k and q reads are warp-uniform broadcasts, v reads and o writes coalesced; the state is written once at the end."""
import torch
import tvm
from tvm.script import tirx as T

DVT = 64           # state columns (threads) per CTA
CHUNK = 64
_compiled = {}


def _build(batch, seqlen, hk, hv, dk, dv, chunk):
    nchunks = seqlen // chunk
    rep = hv // hk
    scale = dk ** -0.5
    pair_iters = (chunk * chunk + DVT - 1) // DVT
    row_iters = (chunk + DVT - 1) // DVT

    @T.prim_func
    def gdr_chunk(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, g_ptr: T.handle, b_ptr: T.handle,
                  h0_ptr: T.handle, o_ptr: T.handle, s_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, seqlen, hk, dk), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, seqlen, hk, dk), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, seqlen, hv, dv), "bfloat16")
        GL = T.match_buffer(g_ptr, (batch, seqlen, hv), "float32")
        BETA = T.match_buffer(b_ptr, (batch, seqlen, hv), "bfloat16")
        H0 = T.match_buffer(h0_ptr, (batch, hv, dk, dv), "float32")
        O = T.match_buffer(o_ptr, (batch, seqlen, hv, dv), "bfloat16")
        S = T.match_buffer(s_ptr, (batch, hv, dk, dv), "float32")
        T.device_entry()
        h, b, js = T.cta_id([hv, batch, dv // DVT])
        tx = T.thread_id([DVT])
        Gs = T.alloc_shared((chunk,), "float64")
        eG = T.alloc_shared((chunk,), "float64")
        eL = T.alloc_shared((chunk,), "float64")
        Bs = T.alloc_shared((chunk,), "float64")
        L = T.alloc_shared((chunk * chunk,), "float32")
        P = T.alloc_shared((chunk * chunk,), "float32")
        col = T.alloc_local((dk,), "float32")
        u = T.alloc_local((chunk,), "float64")
        acc = T.alloc_local((2,), "float64")
        jv = js * DVT + tx
        kh = h // rep
        for d in T.unroll(dk):
            col[d] = H0[b, h, d, jv]
        for c in T.serial(nchunks):
            base = c * chunk
            T.cuda.cta_sync()                       # the previous chunk's readers of the shared matrices are done
            if tx == 0:
                acc[0] = T.float64(0)
                for i in T.serial(chunk):
                    acc[0] = acc[0] + T.Cast("float64", GL[b, base + i, h])
                    Gs[i] = acc[0]
            T.cuda.cta_sync()
            for it in T.serial(row_iters):
                i = it * DVT + tx
                if i < chunk:
                    eG[i] = T.exp(Gs[i])
                    eL[i] = T.exp(Gs[chunk - 1] - Gs[i])
                    Bs[i] = T.Cast("float64", BETA[b, base + i, h])
            for it in T.serial(pair_iters):
                e = it * DVT + tx
                if e < chunk * chunk:
                    L[e] = T.float32(0)
                    P[e] = T.float32(0)
                    if e % chunk <= e // chunk:
                        acc[0] = T.float64(0)
                        acc[1] = T.float64(0)
                        for d in T.serial(dk):
                            kj = T.Cast("float64", K[b, base + e % chunk, kh, d])
                            acc[0] = acc[0] + T.Cast("float64", K[b, base + e // chunk, kh, d]) * kj
                            acc[1] = acc[1] + T.Cast("float64", Q[b, base + e // chunk, kh, d]) * kj
                        dec = T.exp(Gs[e // chunk] - Gs[e % chunk])
                        P[e] = T.Cast("float32", dec * acc[1])
                        if e % chunk < e // chunk:
                            L[e] = T.Cast("float32", T.Cast("float64", BETA[b, base + e // chunk, h]) * dec * acc[0])
            T.cuda.cta_sync()
            for i in T.serial(chunk):               # r, then forward substitution u = (I + L)^-1 r
                acc[0] = T.float64(0)
                for d in T.unroll(dk):
                    acc[0] = acc[0] + T.Cast("float64", K[b, base + i, kh, d]) * T.Cast("float64", col[d])
                acc[1] = Bs[i] * (T.Cast("float64", V[b, base + i, h, jv]) - eG[i] * acc[0])
                for m in T.serial(i):
                    acc[1] = acc[1] - T.Cast("float64", L[i * chunk + m]) * u[m]
                u[i] = acc[1]
            for i in T.serial(chunk):               # outputs, from the chunk's initial state
                acc[0] = T.float64(0)
                for d in T.unroll(dk):
                    acc[0] = acc[0] + T.Cast("float64", Q[b, base + i, kh, d]) * T.Cast("float64", col[d])
                acc[1] = eG[i] * acc[0]
                for m in T.serial(i + 1):
                    acc[1] = acc[1] + T.Cast("float64", P[i * chunk + m]) * u[m]
                O[b, base + i, h, jv] = T.Cast("bfloat16", T.Cast("float32", T.float64(scale) * acc[1]))
            for d in T.unroll(dk):                  # carry the state column to the next chunk
                acc[0] = T.float64(0)
                for i in T.serial(chunk):
                    acc[0] = acc[0] + eL[i] * T.Cast("float64", K[b, base + i, kh, d]) * u[i]
                col[d] = T.Cast("float32", eG[chunk - 1] * T.Cast("float64", col[d]) + acc[0])
        for d in T.unroll(dk):
            S[b, h, d, jv] = col[d]

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": gdr_chunk}), target=target, tir_pipeline="tirx")["main"]


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
    key = (batch, seqlen, hk, hv, dk, dv, CHUNK)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    o = torch.empty((batch, seqlen, hv, dv), dtype=torch.bfloat16, device=q.device)
    state = torch.empty((batch, hv, dk, dv), dtype=torch.float32, device=q.device)
    _compiled[key](q.contiguous(), k.contiguous(), v.contiguous(), g.contiguous(), beta.contiguous(),
                   initial_state.contiguous(), o, state)
    return o, state
