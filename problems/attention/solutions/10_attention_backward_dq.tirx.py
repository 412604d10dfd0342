"""TIRx (sm_90a) solution: one CTA of 128 threads per (query row i, head, sequence), running the CPU solution's two
passes with the keys spread over the threads. The CTA stages q_i and dO_i (fp32) in shared memory and thread 0
forms Delta = sum_d dO[i, d] * o[i, d]. (1) Thread t takes keys j = t, t + 128, ... <= i: the fp32 probability
p = exp(scale * q_i . k_j - lse_i) recomputed from the saved log-sum-exp, dp = dO_i . v_j, and
ds_j = p * (dp - Delta) into a shared row. (2) Thread t owns elements d = t, t + 128, ... and writes
dQ[i, d] = scale * sum_j ds_j * k[j, d] (coalesced across the threads)."""
import math

import torch
import tvm
from tvm.script import tirx as T

THREADS = 128
SMEM_LIMIT = 48 * 1024  # static shared memory per CTA
_compiled = {}


def _build(batch: int, seq: int, heads: int, kv_heads: int, head_dim: int):
    group = heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def attention_bwd_dq(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, o_ptr: T.handle, do_ptr: T.handle,
                         lse_ptr: T.handle, dq_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, seq, heads, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, seq, kv_heads, head_dim), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, seq, kv_heads, head_dim), "bfloat16")
        O = T.match_buffer(o_ptr, (batch, seq, heads, head_dim), "bfloat16")
        DO = T.match_buffer(do_ptr, (batch, seq, heads, head_dim), "bfloat16")
        LSE = T.match_buffer(lse_ptr, (batch, heads, seq), "float32")
        DQ = T.match_buffer(dq_ptr, (batch, seq, heads, head_dim), "float32")
        T.device_entry()
        i, h, b = T.cta_id([seq, heads, batch])
        tx = T.thread_id([THREADS])
        s_ds = T.alloc_shared((seq,), "float32")
        s_q = T.alloc_shared((head_dim,), "float32")
        s_do = T.alloc_shared((head_dim,), "float32")
        s_delta = T.alloc_shared((1,), "float32")
        qk = T.alloc_local((1,), "float32")
        dov = T.alloc_local((1,), "float32")
        acc = T.alloc_local((1,), "float32")
        kvh = h // group
        for e in T.serial((head_dim - tx + (THREADS - 1)) // THREADS):
            s_q[tx + THREADS * e] = T.Cast("float32", Q[b, i, h, tx + THREADS * e])
            s_do[tx + THREADS * e] = T.Cast("float32", DO[b, i, h, tx + THREADS * e])
        if tx == 0:
            acc[0] = T.float32(0)
            for d in T.serial(head_dim):
                acc[0] = acc[0] + T.Cast("float32", DO[b, i, h, d]) * T.Cast("float32", O[b, i, h, d])
            s_delta[0] = acc[0]
        T.cuda.cta_sync()
        # pass 1: ds_j for this thread's keys j = tx + THREADS * n <= i
        for n in T.serial((i + 1 - tx + (THREADS - 1)) // THREADS):
            j = tx + THREADS * n
            qk[0] = T.float32(0)
            dov[0] = T.float32(0)
            for d in T.serial(head_dim):
                qk[0] = qk[0] + s_q[d] * T.Cast("float32", K[b, j, kvh, d])
                dov[0] = dov[0] + s_do[d] * T.Cast("float32", V[b, j, kvh, d])
            s_ds[j] = T.exp(qk[0] * T.float32(scale) - LSE[b, h, i]) * (dov[0] - s_delta[0])
        T.cuda.cta_sync()
        # pass 2: this thread's elements d = tx + THREADS * e
        for e in T.serial((head_dim - tx + (THREADS - 1)) // THREADS):
            acc[0] = T.float32(0)
            for j in T.serial(i + 1):
                acc[0] = acc[0] + s_ds[j] * T.Cast("float32", K[b, j, kvh, tx + THREADS * e])
            DQ[b, i, h, tx + THREADS * e] = acc[0] * T.float32(scale)

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": attention_bwd_dq}), target=target, tir_pipeline="tirx")


def solve(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, dout: torch.Tensor,
          lse: torch.Tensor):
    batch, seq, heads, head_dim = q.shape
    kv_heads = k.shape[2]
    if tuple(k.shape) != (batch, seq, kv_heads, head_dim) or v.shape != k.shape:
        raise ValueError("k and v must be (batch, seq, kv_heads, head_dim)")
    if o.shape != q.shape or dout.shape != q.shape:
        raise ValueError("o and dout must be shaped like q")
    if tuple(lse.shape) != (batch, heads, seq):
        raise ValueError("lse must be (batch, heads, seq)")
    if heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    if heads > 65535 or batch > 65535:
        raise ValueError("too many heads or sequences for the grid")
    if 4 * (seq + 2 * head_dim + 1) > SMEM_LIMIT:
        raise ValueError(f"the dS row of {seq} keys does not fit in {SMEM_LIMIT} bytes of shared memory")
    if any(t.dtype != torch.bfloat16 for t in (q, k, v, o, dout)) or lse.dtype != torch.float32:
        raise ValueError("expects bfloat16 q, k, v, o, dout and a float32 lse")
    if q.numel() >= 2**31:
        raise ValueError("tensors too large for 32-bit indexing")
    key = (batch, seq, heads, kv_heads, head_dim)
    if key not in _compiled:
        _compiled[key] = _build(*key)["main"]
    q, k, v, o, dout, lse = (t.contiguous() for t in (q, k, v, o, dout, lse))
    dq = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    _compiled[key](q, k, v, o, dout, lse, dq)
    return dq
