"""CuTe DSL (sm_90a) solution: one CTA of 128 threads per (key row j, KV head, sequence), running the CPU solution's
two passes with the queries spread over the threads. The CTA stages k_j and v_j (fp32) in shared memory; thread t
owns head elements d = t, t + 128, ... and keeps their dK and dV sums in fp32 registers across the whole group of
query heads. For each query head of the group, the queries i >= j are taken in chunks of 512: (1) thread t takes
queries i = c0 + t, c0 + t + 128, ... of the chunk and writes p_i = exp(scale * q_i . k_j - lse_i) and
ds_i = p_i * (dO_i . v_j - Delta_i) to two shared rows; (2) every thread adds sum_i p_i * dO[i, d] and
sum_i ds_i * q[i, d] for its elements. Each dK, dV element is written once at the end; no atomics."""
import math

import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

THREADS = 128
CHUNK = 512  # queries per shared-memory round
_compiled = {}


def _make_kernel(seq: int, group: int, head_dim: int):
    dpt = head_dim // THREADS
    scale = 1.0 / math.sqrt(head_dim)

    @cute.kernel
    def dkdv_kernel(gQ: cute.Tensor, gK: cute.Tensor, gV: cute.Tensor, gDO: cute.Tensor, gLSE: cute.Tensor,
                    gDELTA: cute.Tensor, gDK: cute.Tensor, gDV: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        j, g, b = cute.arch.block_idx()

        smem = cutlass.memory.SmemAllocator()
        s_k = smem.allocate_tensor(cutlass.Float32, cute.make_layout(head_dim))
        s_v = smem.allocate_tensor(cutlass.Float32, cute.make_layout(head_dim))
        s_p = smem.allocate_tensor(cutlass.Float32, cute.make_layout(CHUNK))
        s_ds = smem.allocate_tensor(cutlass.Float32, cute.make_layout(CHUNK))
        dk_r = cute.make_rmem_tensor(dpt, cutlass.Float32)
        dv_r = cute.make_rmem_tensor(dpt, cutlass.Float32)

        for e in cutlass.range_constexpr(dpt):
            s_k[tidx + THREADS * e] = gK[b, j, g, tidx + THREADS * e].to(cutlass.Float32)
            s_v[tidx + THREADS * e] = gV[b, j, g, tidx + THREADS * e].to(cutlass.Float32)
            dk_r[e] = cutlass.Float32(0.0)
            dv_r[e] = cutlass.Float32(0.0)
        cute.arch.sync_threads()

        for hh in cutlass.range_constexpr(group):
            h = g * group + hh
            for c0 in range(j, seq, CHUNK):
                cnt = seq - c0
                if cnt > CHUNK:
                    cnt = cutlass.Int32(CHUNK)
                # pass 1: p and ds of this thread's queries of the chunk
                for ii in range(tidx, cnt, THREADS):
                    i = c0 + ii
                    qk = cutlass.Float32(0.0)
                    dov = cutlass.Float32(0.0)
                    for d in range(head_dim):
                        qk = qk + gQ[b, i, h, d].to(cutlass.Float32) * s_k[d]
                        dov = dov + gDO[b, i, h, d].to(cutlass.Float32) * s_v[d]
                    p = cute.math.exp(qk * cutlass.Float32(scale) - gLSE[b, h, i])
                    s_p[ii] = p
                    s_ds[ii] = p * (dov - gDELTA[b, h, i])
                cute.arch.sync_threads()
                # pass 2: this thread's elements, summed over the chunk (coalesced across the threads)
                for e in cutlass.range_constexpr(dpt):
                    d = tidx + THREADS * e
                    adv = dv_r[e]
                    adk = dk_r[e]
                    for ii in range(cnt):
                        adv = adv + s_p[ii] * gDO[b, c0 + ii, h, d].to(cutlass.Float32)
                        adk = adk + s_ds[ii] * gQ[b, c0 + ii, h, d].to(cutlass.Float32)
                    dv_r[e] = adv
                    dk_r[e] = adk
                cute.arch.sync_threads()

        for e in cutlass.range_constexpr(dpt):
            gDK[b, j, g, tidx + THREADS * e] = dk_r[e] * cutlass.Float32(scale)
            gDV[b, j, g, tidx + THREADS * e] = dv_r[e]

    @cute.jit
    def attention_bwd_dkdv(mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mDO: cute.Tensor, mLSE: cute.Tensor,
                           mDELTA: cute.Tensor, mDK: cute.Tensor, mDV: cute.Tensor):
        dkdv_kernel(mQ, mK, mV, mDO, mLSE, mDELTA, mDK, mDV).launch(
            grid=(mK.shape[1], mK.shape[2], mK.shape[0]), block=(THREADS, 1, 1))

    return attention_bwd_dkdv


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
    q, k, v, dout, lse, delta = (t.contiguous() for t in (q, k, v, dout, lse, delta))
    dk = torch.empty(k.shape, dtype=torch.float32, device=k.device)
    dv = torch.empty(v.shape, dtype=torch.float32, device=v.device)
    args = [from_dlpack(t) for t in (q, k, v, dout, lse, delta, dk, dv)]
    key = (batch, seq, heads, kv_heads, head_dim)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(seq, heads // kv_heads, head_dim), *args)
    _compiled[key](*args)
    return dk, dv
