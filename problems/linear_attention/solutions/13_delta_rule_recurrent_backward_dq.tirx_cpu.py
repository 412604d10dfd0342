"""CPU-target (LLVM) TIRx solution: per (batch, head) the fp32 state is recomputed in a local (K, V) buffer from
h0. Each step: kv[j] = (S^T k)[j] over the key rows, u[j] = beta * (v[j] - kv[j]), then one pass over the rows
i applies S[i, j] += k[i] u[j] and accumulates dq[i] = scale * sum_j S[i, j] do[j] from the updated row. Scalars
live in small buffers allocated once: a scalar bound inside a loop becomes a workspace allocation per iteration on
the LLVM target."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(batch: int, seqlen: int, heads: int, dk: int, dv: int):
    scale = dk ** -0.5

    @T.prim_func
    def delta_bwd_dq(k_ptr: T.handle, v_ptr: T.handle, b_ptr: T.handle, h0_ptr: T.handle, do_ptr: T.handle,
                     dq_ptr: T.handle):
        K = T.match_buffer(k_ptr, (batch, seqlen, heads, dk), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, seqlen, heads, dv), "bfloat16")
        BETA = T.match_buffer(b_ptr, (batch, seqlen, heads), "bfloat16")
        H0 = T.match_buffer(h0_ptr, (batch, heads, dk, dv), "float32")
        DO = T.match_buffer(do_ptr, (batch, seqlen, heads, dv), "bfloat16")
        DQ = T.match_buffer(dq_ptr, (batch, seqlen, heads, dk), "bfloat16")
        S = T.alloc_buffer((dk, dv), "float32")
        kv = T.alloc_buffer((dv,), "float32")
        u = T.alloc_buffer((dv,), "float32")
        dov = T.alloc_buffer((dv,), "float32")
        acc = T.alloc_buffer((1,), "float32")
        for b in T.serial(batch):
            for h in T.serial(heads):
                for i in T.serial(dk):
                    for j in T.serial(dv):
                        S[i, j] = H0[b, h, i, j]
                for t in T.serial(seqlen):
                    for j in T.serial(dv):
                        kv[j] = T.float32(0)
                        dov[j] = T.Cast("float32", DO[b, t, h, j])
                    for i in T.serial(dk):
                        for j in T.serial(dv):
                            kv[j] = kv[j] + S[i, j] * T.Cast("float32", K[b, t, h, i])
                    for j in T.serial(dv):
                        u[j] = T.Cast("float32", BETA[b, t, h]) * (T.Cast("float32", V[b, t, h, j]) - kv[j])
                    for i in T.serial(dk):
                        acc[0] = T.float32(0)
                        for j in T.serial(dv):
                            S[i, j] = S[i, j] + T.Cast("float32", K[b, t, h, i]) * u[j]
                            acc[0] = acc[0] + S[i, j] * dov[j]
                        DQ[b, t, h, i] = T.Cast("bfloat16", acc[0] * T.float32(scale))

    module = tvm.IRModule({"main": delta_bwd_dq})
    return tvm.compile(module, target="llvm", tir_pipeline="tirx")["main"]


def solve(k, v, beta, h0, do):
    batch, seqlen, heads, dk = k.shape
    dv = v.shape[-1]
    if any(t.dtype != torch.bfloat16 for t in (k, v, beta, do)) or h0.dtype != torch.float32:
        raise ValueError("k, v, beta and do must be bfloat16, h0 float32")
    if tuple(v.shape) != (batch, seqlen, heads, dv) or tuple(do.shape) != tuple(v.shape):
        raise ValueError("v and do must be (BATCH, SEQLEN, NUM_HEADS, HEAD_V_DIM)")
    if tuple(beta.shape) != (batch, seqlen, heads) or tuple(h0.shape) != (batch, heads, dk, dv):
        raise ValueError("beta must be (BATCH, SEQLEN, NUM_HEADS) and h0 (BATCH, NUM_HEADS, K, V)")
    key = (batch, seqlen, heads, dk, dv)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    dq = torch.empty((batch, seqlen, heads, dk), dtype=k.dtype)
    _compiled[key](k.contiguous(), v.contiguous(), beta.contiguous(), h0.contiguous(), do.contiguous(), dq)
    return dq
