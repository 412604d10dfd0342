"""GPU (sm_90a) TIRx solution: the gates act on the key side only, so the value columns of the state evolve
independently. One CTA of 64 threads per (value-column block, head, batch); thread j keeps column j of the
(DK, DV) fp32 state in DK registers for the whole sequence. Each step the CTA turns the raw gate logits into
alpha[i] = exp(logsigmoid(g_t[i]) / GATE_NORM) once, split over the threads into shared memory (float64 math: TVM
builds with --use_fast_math), syncs, then every thread runs one unrolled pass over the key rows: S[i, j] <- alpha[i]
S[i, j] + k[i] v[j] and o_t[j] += (scale q[i]) S[i, j] (q, k warp-uniform broadcasts). State written at the end."""
import torch
import tvm
from tvm.script import tirx as T

GATE_NORM = 16.0   # gate_logit_normalizer of GLA
COLS = 64          # value columns (threads) per CTA
_compiled = {}


def _build(batch: int, seqlen: int, heads: int, dk: int, dv: int):
    scale = dk ** -0.5
    gate_iters = (dk + COLS - 1) // COLS

    @T.prim_func
    def gla_recurrent(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, g_ptr: T.handle, o_ptr: T.handle,
                      s_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, seqlen, heads, dk), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, seqlen, heads, dk), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, seqlen, heads, dv), "bfloat16")
        G = T.match_buffer(g_ptr, (batch, seqlen, heads, dk), "bfloat16")
        O = T.match_buffer(o_ptr, (batch, seqlen, heads, dv), "bfloat16")
        S = T.match_buffer(s_ptr, (batch, heads, dk, dv), "float32")
        T.device_entry()
        cb, h, b = T.cta_id([dv // COLS, heads, batch])
        tx = T.thread_id([COLS])
        j = cb * COLS + tx
        alpha = T.alloc_shared((dk,), "float32")
        col = T.alloc_local((dk,), "float32")
        acc = T.alloc_local((1,), "float32")
        for i in T.unroll(dk):
            col[i] = T.float32(0)
        for t in T.serial(seqlen):
            T.cuda.cta_sync()                   # the previous step's readers of alpha are done
            for it in T.unroll(gate_iters):
                i = it * COLS + tx
                if i < dk:
                    x = T.Cast("float64", G[b, t, h, i])
                    ls = T.min(x, T.float64(0)) - T.log(T.float64(1) + T.exp(-T.fabs(x)))
                    alpha[i] = T.Cast("float32", T.exp(ls / T.float64(GATE_NORM)))
            T.cuda.cta_sync()
            vj = T.Cast("float32", V[b, t, h, j])
            acc[0] = T.float32(0)
            for i in T.unroll(dk):
                s_new = col[i] * alpha[i] + T.Cast("float32", K[b, t, h, i]) * vj
                col[i] = s_new
                acc[0] = acc[0] + (T.Cast("float32", Q[b, t, h, i]) * T.float32(scale)) * s_new
            O[b, t, h, j] = T.Cast("bfloat16", acc[0])
        for i in T.unroll(dk):
            S[b, h, i, j] = col[i]

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    module = tvm.IRModule({"main": gla_recurrent})
    return tvm.compile(module, target=target, tir_pipeline="tirx")["main"]


def solve(q, k, v, g):
    batch, seqlen, heads, dk = q.shape
    dv = v.shape[-1]
    if any(t.dtype != torch.bfloat16 for t in (q, k, v, g)):
        raise ValueError("q, k, v and g must be bfloat16")
    if tuple(k.shape) != tuple(q.shape) or tuple(g.shape) != tuple(q.shape) or tuple(v.shape[:3]) != (batch, seqlen, heads):
        raise ValueError("q, k, g must be (BATCH, SEQLEN, NUM_HEADS, HEAD_K_DIM), v (BATCH, SEQLEN, NUM_HEADS, HEAD_V_DIM)")
    if dv % COLS != 0 or dk > 128:
        raise ValueError(f"HEAD_V_DIM={dv} must be a multiple of {COLS} and HEAD_K_DIM={dk} at most 128 (registers)")
    key = (batch, seqlen, heads, dk, dv)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    o = torch.empty((batch, seqlen, heads, dv), dtype=v.dtype, device=v.device)
    state = torch.empty((batch, heads, dk, dv), dtype=torch.float32, device=v.device)
    _compiled[key](q.contiguous(), k.contiguous(), v.contiguous(), g.contiguous(), o, state)
    return o, state
