"""TIRx (sm_90a) solution: one CTA of 256 threads per (query head, sequence), running the CPU solution's three
passes with the keys spread over the threads. (1) Thread i takes keys t = i, i + 256, ...: an fp32 dot product of
q and k_t scaled by 1/sqrt(d) and capped as 50 * tanh(s / 50), stored in a shared score row, with a per-thread
max; the maxima are reduced through shared memory. (2) Each thread turns its scores into exp(s - max) and sums
them; the sums are reduced the same way. (3) Thread i owns output elements d = i, i + 256, ... and sums
p_t * v[t, d] over all keys (coalesced across the threads), then divides by the sum."""
import math

import torch
import tvm
from tvm.script import tirx as T

THREADS = 256
SOFTCAP = 50.0  # Gemma-2 attn_logit_softcapping
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
SMEM_LIMIT = 48 * 1024  # static shared memory per CTA
_compiled = {}


def _build(batch: int, q_heads: int, head_dim: int, max_tokens: int, kv_heads: int):
    group = q_heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def softcap_decode(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, cl_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, q_heads, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, max_tokens, kv_heads, head_dim), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, max_tokens, kv_heads, head_dim), "bfloat16")
        CL = T.match_buffer(cl_ptr, (batch,), "int32")
        O = T.match_buffer(o_ptr, (batch, q_heads, head_dim), "bfloat16")
        T.device_entry()
        h, b = T.cta_id([q_heads, batch])
        tx = T.thread_id([THREADS])
        s_score = T.alloc_shared((max_tokens,), "float32")
        s_red = T.alloc_shared((THREADS,), "float32")
        s_stat = T.alloc_shared((2,), "float32")  # 0: max score, 1: sum of exp
        acc = T.alloc_local((1,), "float32")
        part = T.alloc_local((1,), "float32")
        kvh = h // group
        ctx = T.min(CL[b], max_tokens)
        # pass 1: capped scores of this thread's keys t = tx + THREADS * i (none when ctx <= tx)
        part[0] = T.float32(NEG_BIG)
        for i in T.serial((ctx - tx + (THREADS - 1)) // THREADS):
            t = tx + THREADS * i
            acc[0] = T.float32(0)
            for d in T.serial(head_dim):
                acc[0] = acc[0] + T.Cast("float32", Q[b, h, d]) * T.Cast("float32", K[b, t, kvh, d])
            s_score[t] = T.float32(SOFTCAP) * T.tanh(acc[0] * T.float32(scale / SOFTCAP))
            part[0] = T.max(part[0], s_score[t])
        s_red[tx] = part[0]
        T.cuda.cta_sync()
        if tx == 0:
            acc[0] = T.float32(NEG_BIG)
            for w in T.serial(THREADS):
                acc[0] = T.max(acc[0], s_red[w])
            s_stat[0] = acc[0]
        T.cuda.cta_sync()
        # pass 2: probabilities (unnormalised) in place, and their sum
        part[0] = T.float32(0)
        for i in T.serial((ctx - tx + (THREADS - 1)) // THREADS):
            t = tx + THREADS * i
            s_score[t] = T.exp(s_score[t] - s_stat[0])
            part[0] = part[0] + s_score[t]
        s_red[tx] = part[0]
        T.cuda.cta_sync()
        if tx == 0:
            acc[0] = T.float32(0)
            for w in T.serial(THREADS):
                acc[0] = acc[0] + s_red[w]
            s_stat[1] = acc[0]
        T.cuda.cta_sync()
        # pass 3: this thread's output elements d = tx + THREADS * j
        for j in T.serial((head_dim - tx + (THREADS - 1)) // THREADS):
            d = tx + THREADS * j
            acc[0] = T.float32(0)
            for t in T.serial(ctx):
                acc[0] = acc[0] + s_score[t] * T.Cast("float32", V[b, t, kvh, d])
            O[b, h, d] = T.Cast("bfloat16", acc[0] / s_stat[1])

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": softcap_decode}), target=target, tir_pipeline="tirx")


def solve(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, context_lens: torch.Tensor):
    batch, q_heads, head_dim = q.shape
    cache_batch, max_tokens, kv_heads, cache_dim = k_cache.shape
    if cache_batch != batch or cache_dim != head_dim or v_cache.shape != k_cache.shape:
        raise ValueError("KV cache must be (batch, max_context, kv_heads, head_dim) for both K and V")
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    if q_heads > 65535 or batch > 65535:
        raise ValueError("too many heads or sequences for the grid")
    if 4 * (max_tokens + THREADS + 2) > SMEM_LIMIT:
        raise ValueError(f"the score row of {max_tokens} tokens does not fit in {SMEM_LIMIT} bytes of shared memory")
    if q.dtype != torch.bfloat16 or k_cache.dtype != torch.bfloat16 or v_cache.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q and caches")
    if context_lens.dtype != torch.int32:
        raise ValueError("expects int32 context lengths")
    if k_cache.numel() >= 2**31:
        raise ValueError("KV cache too large for 32-bit indexing")
    key = (batch, q_heads, head_dim, max_tokens, kv_heads)
    if key not in _compiled:
        _compiled[key] = _build(*key)["main"]
    q = q.contiguous()
    k_cache = k_cache.contiguous()
    v_cache = v_cache.contiguous()
    context_lens = context_lens.contiguous()
    out = torch.empty_like(q)
    _compiled[key](q, k_cache, v_cache, context_lens, out)
    return out
