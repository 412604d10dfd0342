"""CPU-target (LLVM) TIRx solution: per (batch, head) the fp32 state is copied from state0 into the final-state
output and advanced there in place. For each step t and key row i the row's decay exp(w_t[i]), r_t[i], k_t[i] and
u[i] are scalars; the inner loop over value columns j accumulates the bonus readout o_t[j] += r*(S[i, j] + u*k*v[j])
and overwrites S[i, j] <- S[i, j] * exp(w) + k * v[j] in the same pass (the readout uses the old entry). Scalars
live in small buffers allocated once: a scalar bound inside a loop becomes a workspace allocation per iteration on
the LLVM target."""
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
        acc = T.alloc_buffer((dv,), "float32")
        vt = T.alloc_buffer((dv,), "float32")
        row = T.alloc_buffer((4,), "float32")   # the key row's r, k, u and exp(w)
        for b in T.serial(batch):
            for h in T.serial(heads):
                for i in T.serial(dk):
                    for j in T.serial(dv):
                        S[b, h, i, j] = S0[b, h, i, j]
                for t in T.serial(seqlen):
                    for j in T.serial(dv):
                        acc[j] = T.float32(0)
                        vt[j] = T.Cast("float32", V[b, t, h, j])
                    for i in T.serial(dk):
                        row[0] = T.Cast("float32", R[b, t, h, i])
                        row[1] = T.Cast("float32", K[b, t, h, i])
                        row[2] = T.Cast("float32", U[h, i])
                        row[3] = T.exp(W[b, t, h, i])
                        for j in T.serial(dv):
                            acc[j] = acc[j] + row[0] * (S[b, h, i, j] + row[2] * (row[1] * vt[j]))
                            S[b, h, i, j] = S[b, h, i, j] * row[3] + row[1] * vt[j]
                    for j in T.serial(dv):
                        O[b, t, h, j] = T.Cast("bfloat16", acc[j])

    module = tvm.IRModule({"main": wkv6})
    return tvm.compile(module, target="llvm", tir_pipeline="tirx")["main"]


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
    key = (batch, seqlen, heads, dk, dv)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    o = torch.empty((batch, seqlen, heads, dv), dtype=v.dtype)
    state = torch.empty((batch, heads, dk, dv), dtype=torch.float32)
    _compiled[key](r.contiguous(), k.contiguous(), v.contiguous(), w.contiguous(), u.contiguous(),
                   state0.contiguous(), o, state)
    return o, state
