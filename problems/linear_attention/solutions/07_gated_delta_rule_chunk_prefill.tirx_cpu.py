"""CPU-target (LLVM) TIRx solution, the GPU kernels' algorithm with the thread loop made serial: per (batch, value
head) the state S starts as the cached one and the chunks of 64 are walked in order. Per chunk: G = within-chunk
cumsum of g (and e^G, e^(G_last - G)); the causal C x C matrices L[i, j] = beta_i e^(G_i - G_j) (k_i . k_j) (j < i)
and P[i, j] = e^(G_i - G_j) (q_i . k_j) (j <= i). Then per state column jv (one GPU thread each):
r_i = beta_i (v_i[jv] - e^(G_i) (k_i . S[:, jv])), u = (I + L)^-1 r by forward substitution,
o_i[jv] = DK**-0.5 (e^(G_i) (q_i . S[:, jv]) + sum_{m <= i} P[i, m] u_m), and
S[:, jv] <- e^(G_last) S[:, jv] + sum_i e^(G_last - G_i) k_i u_i. The columns are independent, which is what the
GPU kernels parallelise. S, L and P are stored in float32; the cumsum G, the exps, the dot products, the solve and
the updates run in float64 (a float32 cumsum taken in another order than the reference's shifts every e^G by ~1e-6
relative, past the fp32 state tolerance)."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(batch, seqlen, hk, hv, dk, dv, chunk):
    nchunks = seqlen // chunk
    rep = hv // hk
    scale = dk ** -0.5

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
        Gc = T.alloc_buffer((chunk,), "float64")
        Bc = T.alloc_buffer((chunk,), "float32")
        eG = T.alloc_buffer((chunk,), "float64")
        eL = T.alloc_buffer((chunk,), "float64")
        L = T.alloc_buffer((chunk, chunk), "float32")
        P = T.alloc_buffer((chunk, chunk), "float32")
        u = T.alloc_buffer((chunk,), "float64")
        acc = T.alloc_buffer((2,), "float64")
        run = T.alloc_buffer((1,), "float64")
        for b in T.serial(batch):
            for h in T.serial(hv):
                for d in T.serial(dk):
                    for jv in T.serial(dv):
                        S[b, h, d, jv] = H0[b, h, d, jv]
                for c in T.serial(nchunks):
                    base = c * chunk
                    run[0] = T.float64(0)
                    for i in T.serial(chunk):
                        run[0] = run[0] + T.Cast("float64", GL[b, base + i, h])
                        Gc[i] = run[0]
                        Bc[i] = T.Cast("float32", BETA[b, base + i, h])
                    for i in T.serial(chunk):
                        eG[i] = T.exp(Gc[i])
                        eL[i] = T.exp(Gc[chunk - 1] - Gc[i])
                    for i in T.serial(chunk):
                        for j in T.serial(chunk):
                            L[i, j] = T.float32(0)
                            P[i, j] = T.float32(0)
                            if j <= i:
                                acc[0] = T.float64(0)
                                acc[1] = T.float64(0)
                                for d in T.serial(dk):
                                    acc[0] = acc[0] + T.Cast("float64", K[b, base + i, h // rep, d]) \
                                        * T.Cast("float64", K[b, base + j, h // rep, d])
                                    acc[1] = acc[1] + T.Cast("float64", Q[b, base + i, h // rep, d]) \
                                        * T.Cast("float64", K[b, base + j, h // rep, d])
                                P[i, j] = T.Cast("float32", T.exp(Gc[i] - Gc[j]) * acc[1])
                                if j < i:
                                    L[i, j] = T.Cast("float32", T.Cast("float64", Bc[i]) * T.exp(Gc[i] - Gc[j]) * acc[0])
                    for jv in T.serial(dv):
                        for i in T.serial(chunk):               # r, then forward substitution u = (I + L)^-1 r
                            acc[0] = T.float64(0)
                            for d in T.serial(dk):
                                acc[0] = acc[0] + T.Cast("float64", K[b, base + i, h // rep, d]) \
                                    * T.Cast("float64", S[b, h, d, jv])
                            acc[1] = T.Cast("float64", Bc[i]) * (T.Cast("float64", V[b, base + i, h, jv]) - eG[i] * acc[0])
                            for m in T.serial(i):
                                acc[1] = acc[1] - T.Cast("float64", L[i, m]) * u[m]
                            u[i] = acc[1]
                        for i in T.serial(chunk):               # outputs (state still the chunk's initial one)
                            acc[0] = T.float64(0)
                            for d in T.serial(dk):
                                acc[0] = acc[0] + T.Cast("float64", Q[b, base + i, h // rep, d]) \
                                    * T.Cast("float64", S[b, h, d, jv])
                            acc[1] = eG[i] * acc[0]
                            for m in T.serial(i + 1):
                                acc[1] = acc[1] + T.Cast("float64", P[i, m]) * u[m]
                            O[b, base + i, h, jv] = T.Cast("bfloat16", T.Cast("float32", T.float64(scale) * acc[1]))
                        for d in T.serial(dk):                  # carry the state to the next chunk
                            acc[0] = T.float64(0)
                            for i in T.serial(chunk):
                                acc[0] = acc[0] + eL[i] * T.Cast("float64", K[b, base + i, h // rep, d]) * u[i]
                            S[b, h, d, jv] = T.Cast("float32", eG[chunk - 1] * T.Cast("float64", S[b, h, d, jv])
                                                    + acc[0])

    return tvm.compile(tvm.IRModule({"main": gdr_chunk}), target="llvm", tir_pipeline="tirx")["main"]


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
    chunk = min(64, seqlen)
    while seqlen % chunk != 0:
        chunk //= 2
    key = (batch, seqlen, hk, hv, dk, dv, chunk)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    o = torch.empty((batch, seqlen, hv, dv), dtype=torch.bfloat16)
    state = torch.empty((batch, hv, dk, dv), dtype=torch.float32)
    _compiled[key](q.contiguous(), k.contiguous(), v.contiguous(), g.contiguous(), beta.contiguous(),
                   initial_state.contiguous(), o, state)
    return o, state
