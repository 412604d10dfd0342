"""CuTe DSL (sm_90a) solution: one CTA of 128 threads (one per window slot) per (query head, sequence), running
the CPU solution's three passes over the window [lo, len), lo = max(0, len - 128), with its keys spread over the
threads. (1) Thread j computes the fp32 dot product of q and k[lo + j] scaled by 1/sqrt(d) into a shared score
row; thread 0 reduces the max, starting from the head's sink logit. (2) Thread j turns its score into
exp(s - max); thread 0 sums them, starting from exp(sink - max). (3) Thread i owns output elements
d = i, i + 128, ... and sums p_j * v[lo + j, d] over the window, then divides by that sum."""
import math

import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

WINDOW = 128  # gpt-oss sliding_window
THREADS = WINDOW
_compiled = {}


def _make_kernel(group: int, head_dim: int, max_tokens: int):
    scale = 1.0 / math.sqrt(head_dim)

    @cute.kernel
    def sink_window_kernel(gQ: cute.Tensor, gK: cute.Tensor, gV: cute.Tensor, gS: cute.Tensor, gCL: cute.Tensor,
                           gO: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        h, b, _ = cute.arch.block_idx()
        kvh = h // group

        smem = cutlass.memory.SmemAllocator()
        s_score = smem.allocate_tensor(cutlass.Float32, cute.make_layout(WINDOW))
        s_stat = smem.allocate_tensor(cutlass.Float32, cute.make_layout(2))

        ctx = gCL[b]
        if ctx > max_tokens:
            ctx = cutlass.Int32(max_tokens)
        lo = ctx - WINDOW
        if lo < 0:
            lo = cutlass.Int32(0)
        n = ctx - lo

        # pass 1: the score of window slot tidx, then the max over the window and the sink
        if tidx < n:
            dot = cutlass.Float32(0.0)
            for d in range(head_dim):
                dot = dot + gQ[b, h, d].to(cutlass.Float32) * gK[b, kvh, lo + tidx, d].to(cutlass.Float32)
            s_score[tidx] = dot * cutlass.Float32(scale)
        cute.arch.sync_threads()
        if tidx == 0:
            m = gS[h]
            for j in range(n):
                m = cute.arch.fmax(m, s_score[j])
            s_stat[0] = m
        cute.arch.sync_threads()

        # pass 2: unnormalised probability of slot tidx, then the denominator with the sink's term
        m_all = s_stat[0]
        if tidx < n:
            s_score[tidx] = cute.math.exp(s_score[tidx] - m_all)
        cute.arch.sync_threads()
        if tidx == 0:
            l = cute.math.exp(gS[h] - m_all)
            for j in range(n):
                l = l + s_score[j]
            s_stat[1] = l
        cute.arch.sync_threads()

        # pass 3: this thread's output elements
        l_all = s_stat[1]
        for d in range(tidx, head_dim, THREADS):
            acc = cutlass.Float32(0.0)
            for j in range(n):
                acc = acc + s_score[j] * gV[b, kvh, lo + j, d].to(cutlass.Float32)
            gO[b, h, d] = (acc / l_all).to(gO.element_type)

    @cute.jit
    def sink_window_decode(mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mS: cute.Tensor, mCL: cute.Tensor,
                           mO: cute.Tensor):
        sink_window_kernel(mQ, mK, mV, mS, mCL, mO).launch(grid=(mQ.shape[1], mQ.shape[0], 1),
                                                           block=(THREADS, 1, 1))

    return sink_window_decode


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
    q = q.contiguous()
    k_cache = k_cache.contiguous()
    v_cache = v_cache.contiguous()
    sinks = sinks.contiguous()
    context_lens = context_lens.contiguous()
    out = torch.empty_like(q)
    args = [from_dlpack(t) for t in (q, k_cache, v_cache, sinks, context_lens, out)]
    key = (batch, q_heads, head_dim, kv_heads, max_tokens)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(q_heads // kv_heads, head_dim, max_tokens), *args)
    _compiled[key](*args)
    return out
