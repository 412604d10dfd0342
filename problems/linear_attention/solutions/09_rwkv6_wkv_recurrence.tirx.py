"""GPU (sm_90a) TIRx solution: one CTA per (head, batch), one thread per value column j (HEAD_SIZE threads). The
decay diag(exp(w_t)) acts on the key side only, so the V state columns evolve independently: thread j keeps column
j of the (K, V) fp32 state in K registers for the whole sequence. Each step it reads v_t[j] (coalesced) and the
warp-uniform broadcasts r_t, k_t, w_t, u, accumulates the bonus readout o_t[j] = sum_i r[i] * (S[i, j] +
u[i] k[i] v[j]) and updates S[i, j] <- S[i, j] exp(w[i]) + k[i] v[j] in the same unrolled pass over i; no
synchronisation. exp is evaluated in float64 (TVM builds with --use_fast_math). The column is written at the end."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(batch: int, seqlen: int, heads: int, dk: int, dv: int):
    @T.prim_func
    def wkv6(r_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, w_ptr: T.handle, u_ptr: T.handle,
             s0_ptr: T.handle, o_ptr: T.handle, s_ptr: T.handle):
        R = T.match_buffer(r_ptr, (batch, seqlen, heads, dk), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, seqlen, heads, dk), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, seqlen, heads, dv), "bfloat16")
        W = T.match_buffer(w_ptr, (batch, seqlen, heads, dk), "float32")
        U = T.match_buffer(u_ptr, (heads, dk), "bfloat16")
        S0 = T.match_buffer(s0_ptr, (batch, heads, dk, dv), "float32")
        O = T.match_buffer(o_ptr, (batch, seqlen, heads, dv), "bfloat16")
        S = T.match_buffer(s_ptr, (batch, heads, dk, dv), "float32")
        T.device_entry()
        h, b = T.cta_id([heads, batch])
        j = T.thread_id([dv])
        col = T.alloc_local((dk,), "float32")
        acc = T.alloc_local((1,), "float32")
        for i in T.unroll(dk):
            col[i] = S0[b, h, i, j]
        for t in T.serial(seqlen):
            vj = T.Cast("float32", V[b, t, h, j])
            acc[0] = T.float32(0)
            for i in T.unroll(dk):
                kv = T.Cast("float32", K[b, t, h, i]) * vj
                s_old = col[i]
                acc[0] = acc[0] + T.Cast("float32", R[b, t, h, i]) * (s_old + T.Cast("float32", U[h, i]) * kv)
                col[i] = s_old * T.Cast("float32", T.exp(T.Cast("float64", W[b, t, h, i]))) + kv
            O[b, t, h, j] = T.Cast("bfloat16", acc[0])
        for i in T.unroll(dk):
            S[b, h, i, j] = col[i]

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    module = tvm.IRModule({"main": wkv6})
    return tvm.compile(module, target=target, tir_pipeline="tirx")["main"]


def solve(r, k, v, w, u, state0):
    batch, seqlen, heads, dk = r.shape
    dv = v.shape[-1]
    if r.dtype != torch.bfloat16 or k.dtype != torch.bfloat16 or v.dtype != torch.bfloat16:
        raise ValueError("r, k, v must be bfloat16")
    if w.dtype != torch.float32 or state0.dtype != torch.float32 or u.dtype != torch.bfloat16:
        raise ValueError("w and state0 must be float32, u bfloat16")
    if tuple(k.shape) != (batch, seqlen, heads, dk) or tuple(w.shape) != (batch, seqlen, heads, dk):
        raise ValueError("k and w must have r's shape (BATCH, SEQLEN, NUM_HEADS, HEAD_SIZE)")
    if tuple(u.shape) != (heads, dk) or tuple(state0.shape) != (batch, heads, dk, dv):
        raise ValueError("u must be (NUM_HEADS, K) and state0 (BATCH, NUM_HEADS, K, V)")
    if dv % 32 != 0 or dv > 1024 or dk > 128:
        raise ValueError("V must be a multiple of 32 (<= 1024, one thread per column) and K <= 128 (registers)")
    key = (batch, seqlen, heads, dk, dv)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    o = torch.empty((batch, seqlen, heads, dv), dtype=v.dtype, device=v.device)
    state = torch.empty((batch, heads, dk, dv), dtype=torch.float32, device=v.device)
    _compiled[key](r.contiguous(), k.contiguous(), v.contiguous(), w.contiguous(), u.contiguous(),
                   state0.contiguous(), o, state)
    return o, state
