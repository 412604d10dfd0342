"""TIRx (sm_90a) solution: one CTA of 128 threads per (key row j, KV head, sequence), running the CPU solution's two
passes with the queries spread over the threads. The CTA stages k_j and v_j (fp32) in shared memory; thread t owns
head elements d = t, t + 128, ... and keeps their dK and dV sums in fp32 registers across the whole group of query
heads. For each query head of the group, the queries i >= j are taken in chunks of 512: (1) thread t takes queries
i = c0 + t, c0 + t + 128, ... of the chunk and writes p_i = exp(scale * q_i . k_j - lse_i) and
ds_i = p_i * (dO_i . v_j - Delta_i) to two shared rows; (2) every thread adds sum_i p_i * dO[i, d] and
sum_i ds_i * q[i, d] for its elements. Each dK, dV element is written once at the end; no atomics."""
import math

import torch
import tvm
from tvm.script import tirx as T

THREADS = 128
CHUNK = 512  # queries per shared-memory round
_compiled = {}


def _build(batch: int, seq: int, heads: int, kv_heads: int, head_dim: int):
    group = heads // kv_heads
    dpt = head_dim // THREADS
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def attention_bwd_dkdv(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, do_ptr: T.handle, lse_ptr: T.handle,
                           delta_ptr: T.handle, dk_ptr: T.handle, dv_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, seq, heads, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, seq, kv_heads, head_dim), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, seq, kv_heads, head_dim), "bfloat16")
        DO = T.match_buffer(do_ptr, (batch, seq, heads, head_dim), "bfloat16")
        LSE = T.match_buffer(lse_ptr, (batch, heads, seq), "float32")
        DELTA = T.match_buffer(delta_ptr, (batch, heads, seq), "float32")
        DK = T.match_buffer(dk_ptr, (batch, seq, kv_heads, head_dim), "float32")
        DV = T.match_buffer(dv_ptr, (batch, seq, kv_heads, head_dim), "float32")
        T.device_entry()
        j, g, b = T.cta_id([seq, kv_heads, batch])
        tx = T.thread_id([THREADS])
        s_k = T.alloc_shared((head_dim,), "float32")
        s_v = T.alloc_shared((head_dim,), "float32")
        s_p = T.alloc_shared((CHUNK,), "float32")
        s_ds = T.alloc_shared((CHUNK,), "float32")
        dk_r = T.alloc_local((dpt,), "float32")
        dv_r = T.alloc_local((dpt,), "float32")
        red = T.alloc_local((3,), "float32")  # 0: q.k, 1: dO.v, 2: probability
        for e in T.unroll(dpt):
            s_k[tx + THREADS * e] = T.Cast("float32", K[b, j, g, tx + THREADS * e])
            s_v[tx + THREADS * e] = T.Cast("float32", V[b, j, g, tx + THREADS * e])
            dk_r[e] = T.float32(0)
            dv_r[e] = T.float32(0)
        T.cuda.cta_sync()
        for hh in T.serial(group):
            h = g * group + hh
            for c in T.serial((seq - j + (CHUNK - 1)) // CHUNK):
                c0 = j + c * CHUNK
                cnt = T.min(CHUNK, seq - c0)
                # pass 1: p and ds of this thread's queries of the chunk
                for n in T.serial((cnt - tx + (THREADS - 1)) // THREADS):
                    ii = tx + THREADS * n
                    red[0] = T.float32(0)
                    red[1] = T.float32(0)
                    for d in T.serial(head_dim):
                        red[0] = red[0] + T.Cast("float32", Q[b, c0 + ii, h, d]) * s_k[d]
                        red[1] = red[1] + T.Cast("float32", DO[b, c0 + ii, h, d]) * s_v[d]
                    red[2] = T.exp(red[0] * T.float32(scale) - LSE[b, h, c0 + ii])
                    s_p[ii] = red[2]
                    s_ds[ii] = red[2] * (red[1] - DELTA[b, h, c0 + ii])
                T.cuda.cta_sync()
                # pass 2: this thread's elements, summed over the chunk (coalesced across the threads)
                for e in T.unroll(dpt):
                    for ii in T.serial(cnt):
                        dv_r[e] = dv_r[e] + s_p[ii] * T.Cast("float32", DO[b, c0 + ii, h, tx + THREADS * e])
                        dk_r[e] = dk_r[e] + s_ds[ii] * T.Cast("float32", Q[b, c0 + ii, h, tx + THREADS * e])
                T.cuda.cta_sync()
        for e in T.unroll(dpt):
            DK[b, j, g, tx + THREADS * e] = dk_r[e] * T.float32(scale)
            DV[b, j, g, tx + THREADS * e] = dv_r[e]

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": attention_bwd_dkdv}), target=target, tir_pipeline="tirx")


def solve(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dout: torch.Tensor, lse: torch.Tensor,
          delta: torch.Tensor):
    batch, seq, heads, head_dim = q.shape
    kv_heads = k.shape[2]
    if tuple(k.shape) != (batch, seq, kv_heads, head_dim) or v.shape != k.shape:
        raise ValueError("k and v must be (batch, seq, kv_heads, head_dim)")
    if dout.shape != q.shape:
        raise ValueError("dout must be shaped like q")
    if tuple(lse.shape) != (batch, heads, seq) or delta.shape != lse.shape:
        raise ValueError("lse and delta must be (batch, heads, seq)")
    if heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    if head_dim % THREADS != 0:
        raise ValueError(f"head_dim must be a multiple of {THREADS}")
    if kv_heads > 65535 or batch > 65535:
        raise ValueError("too many KV heads or sequences for the grid")
    if any(t.dtype != torch.bfloat16 for t in (q, k, v, dout)):
        raise ValueError("expects bfloat16 q, k, v and dout")
    if lse.dtype != torch.float32 or delta.dtype != torch.float32:
        raise ValueError("expects float32 lse and delta")
    if q.numel() >= 2**31:
        raise ValueError("tensors too large for 32-bit indexing")
    key = (batch, seq, heads, kv_heads, head_dim)
    if key not in _compiled:
        _compiled[key] = _build(*key)["main"]
    q, k, v, dout, lse, delta = (t.contiguous() for t in (q, k, v, dout, lse, delta))
    dk = torch.empty(k.shape, dtype=torch.float32, device=k.device)
    dv = torch.empty(v.shape, dtype=torch.float32, device=v.device)
    _compiled[key](q, k, v, dout, lse, delta, dk, dv)
    return dk, dv
