"""CPU-target (LLVM) TIRx solution: per (batch, head) the fp32 state lives in the final-state output, zeroed first.
Each step first turns the raw gate logits into alpha[i] = exp(logsigmoid(g_t[i]) / GATE_NORM) (float64 math,
logsigmoid(x) = min(x, 0) - log(1 + exp(-|x|))), then one pass over the key rows i and value columns j updates
S[i, j] <- alpha[i] S[i, j] + k[i] v[j] and accumulates o_t[j] += (scale q[i]) * S_new[i, j]. Scalars live in
small buffers allocated once: a scalar bound inside a loop becomes a workspace allocation per iteration on the
LLVM target."""
import torch
import tvm
from tvm.script import tirx as T

GATE_NORM = 16.0   # gate_logit_normalizer of GLA
_compiled = {}


def _build(batch: int, seqlen: int, heads: int, dk: int, dv: int):
    scale = dk ** -0.5

    @T.prim_func
    def gla_recurrent(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, g_ptr: T.handle, o_ptr: T.handle,
                      s_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, seqlen, heads, dk), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, seqlen, heads, dk), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, seqlen, heads, dv), "bfloat16")
        G = T.match_buffer(g_ptr, (batch, seqlen, heads, dk), "bfloat16")
        O = T.match_buffer(o_ptr, (batch, seqlen, heads, dv), "bfloat16")
        S = T.match_buffer(s_ptr, (batch, heads, dk, dv), "float32")
        alpha = T.alloc_buffer((dk,), "float32")
        acc = T.alloc_buffer((dv,), "float32")
        vt = T.alloc_buffer((dv,), "float32")
        row = T.alloc_buffer((2,), "float32")   # the key row's scale * q and k
        for b in T.serial(batch):
            for h in T.serial(heads):
                for i in T.serial(dk):
                    for j in T.serial(dv):
                        S[b, h, i, j] = T.float32(0)
                for t in T.serial(seqlen):
                    for i in T.serial(dk):
                        alpha[i] = T.Cast("float32", T.exp(
                            (T.min(T.Cast("float64", G[b, t, h, i]), T.float64(0))
                             - T.log(T.float64(1) + T.exp(-T.fabs(T.Cast("float64", G[b, t, h, i])))))
                            / T.float64(GATE_NORM)))
                    for j in T.serial(dv):
                        acc[j] = T.float32(0)
                        vt[j] = T.Cast("float32", V[b, t, h, j])
                    for i in T.serial(dk):
                        row[0] = T.Cast("float32", Q[b, t, h, i]) * T.float32(scale)
                        row[1] = T.Cast("float32", K[b, t, h, i])
                        for j in T.serial(dv):
                            S[b, h, i, j] = S[b, h, i, j] * alpha[i] + row[1] * vt[j]
                            acc[j] = acc[j] + row[0] * S[b, h, i, j]
                    for j in T.serial(dv):
                        O[b, t, h, j] = T.Cast("bfloat16", acc[j])

    module = tvm.IRModule({"main": gla_recurrent})
    return tvm.compile(module, target="llvm", tir_pipeline="tirx")["main"]


def solve(q, k, v, g):
    batch, seqlen, heads, dk = q.shape
    dv = v.shape[-1]
    if any(t.dtype != torch.bfloat16 for t in (q, k, v, g)):
        raise ValueError("q, k, v and g must be bfloat16")
    if tuple(k.shape) != tuple(q.shape) or tuple(g.shape) != tuple(q.shape) or tuple(v.shape[:3]) != (batch, seqlen, heads):
        raise ValueError("q, k, g must be (BATCH, SEQLEN, NUM_HEADS, HEAD_K_DIM), v (BATCH, SEQLEN, NUM_HEADS, HEAD_V_DIM)")
    key = (batch, seqlen, heads, dk, dv)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    o = torch.empty((batch, seqlen, heads, dv), dtype=v.dtype)
    state = torch.empty((batch, heads, dk, dv), dtype=torch.float32)
    _compiled[key](q.contiguous(), k.contiguous(), v.contiguous(), g.contiguous(), o, state)
    return o, state
