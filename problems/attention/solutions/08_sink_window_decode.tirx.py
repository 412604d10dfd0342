"""TIRx (sm_90a) solution: one CTA of 128 threads (one per window slot) per (query head, sequence), running the
CPU solution's three passes over the window [lo, len), lo = max(0, len - 128), with its keys spread over the
threads. (1) Thread j computes the fp32 dot product of q and k[lo + j] scaled by 1/sqrt(d) into a shared score
row; thread 0 reduces the max, starting from the head's sink logit. (2) Thread j turns its score into
exp(s - max); thread 0 sums them, starting from exp(sink - max). (3) Thread i owns output elements
d = i, i + 128, ... and sums p_j * v[lo + j, d] over the window, then divides by that sum."""
import math

import torch
import tvm
from tvm.script import tirx as T

WINDOW = 128  # gpt-oss sliding_window
THREADS = WINDOW
_compiled = {}


def _build(batch: int, q_heads: int, head_dim: int, kv_heads: int, max_tokens: int):
    group = q_heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def sink_window_decode(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, sink_ptr: T.handle,
                           cl_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, q_heads, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, kv_heads, max_tokens, head_dim), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, kv_heads, max_tokens, head_dim), "bfloat16")
        S = T.match_buffer(sink_ptr, (q_heads,), "float32")
        CL = T.match_buffer(cl_ptr, (batch,), "int32")
        O = T.match_buffer(o_ptr, (batch, q_heads, head_dim), "bfloat16")
        T.device_entry()
        h, b = T.cta_id([q_heads, batch])
        tx = T.thread_id([THREADS])
        s_score = T.alloc_shared((WINDOW,), "float32")
        s_stat = T.alloc_shared((2,), "float32")  # 0: max (sink included), 1: denominator (sink included)
        acc = T.alloc_local((1,), "float32")
        kvh = h // group
        ctx = T.min(CL[b], max_tokens)
        lo = T.max(ctx - WINDOW, 0)
        n = ctx - lo
        # pass 1: the score of window slot tx
        if tx < n:
            acc[0] = T.float32(0)
            for d in T.serial(head_dim):
                acc[0] = acc[0] + T.Cast("float32", Q[b, h, d]) * T.Cast("float32", K[b, kvh, lo + tx, d])
            s_score[tx] = acc[0] * T.float32(scale)
        T.cuda.cta_sync()
        if tx == 0:
            acc[0] = S[h]
            for j in T.serial(n):
                acc[0] = T.max(acc[0], s_score[j])
            s_stat[0] = acc[0]
        T.cuda.cta_sync()
        # pass 2: unnormalised probability of slot tx, and the denominator with the sink's term
        if tx < n:
            s_score[tx] = T.exp(s_score[tx] - s_stat[0])
        T.cuda.cta_sync()
        if tx == 0:
            acc[0] = T.exp(S[h] - s_stat[0])
            for j in T.serial(n):
                acc[0] = acc[0] + s_score[j]
            s_stat[1] = acc[0]
        T.cuda.cta_sync()
        # pass 3: this thread's output elements d = tx + THREADS * i
        for i in T.serial((head_dim - tx + (THREADS - 1)) // THREADS):
            d = tx + THREADS * i
            acc[0] = T.float32(0)
            for j in T.serial(n):
                acc[0] = acc[0] + s_score[j] * T.Cast("float32", V[b, kvh, lo + j, d])
            O[b, h, d] = T.Cast("bfloat16", acc[0] / s_stat[1])

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": sink_window_decode}), target=target, tir_pipeline="tirx")


def solve(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, sinks: torch.Tensor,
          context_lens: torch.Tensor):
    batch, q_heads, head_dim = q.shape
    cache_batch, kv_heads, max_tokens, cache_dim = k_cache.shape
    if cache_batch != batch or cache_dim != head_dim or v_cache.shape != k_cache.shape:
        raise ValueError("KV cache must be (batch, kv_heads, max_context, head_dim) for both K and V")
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    if q_heads > 65535 or batch > 65535:
        raise ValueError("too many heads or sequences for the grid")
    if q.dtype != torch.bfloat16 or k_cache.dtype != torch.bfloat16 or v_cache.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q and caches")
    if sinks.dtype != torch.float32 or tuple(sinks.shape) != (q_heads,):
        raise ValueError("expects one float32 sink logit per query head")
    if context_lens.dtype != torch.int32:
        raise ValueError("expects int32 context lengths")
    if k_cache.numel() >= 2**31:
        raise ValueError("KV cache too large for 32-bit indexing")
    key = (batch, q_heads, head_dim, kv_heads, max_tokens)
    if key not in _compiled:
        _compiled[key] = _build(*key)["main"]
    q = q.contiguous()
    k_cache = k_cache.contiguous()
    v_cache = v_cache.contiguous()
    sinks = sinks.contiguous()
    context_lens = context_lens.contiguous()
    out = torch.empty_like(q)
    _compiled[key](q, k_cache, v_cache, sinks, context_lens, out)
    return out
