"""CuTe DSL (sm_90a) solution: one CTA of 256 threads per (query head, sequence), running the CPU solution's three
passes with the keys spread over the threads. (1) Thread i takes keys t = i, i + 256, ...: an fp32 dot product of
q and k_t scaled by 1/sqrt(d) and capped as 50 * tanh(s / 50), stored in a shared score row, with a per-thread
max; the maxima are reduced through shared memory. (2) Each thread turns its scores into exp(s - max) and sums
them; the sums are reduced the same way. (3) Thread i owns output elements d = i, i + 256, ... and sums
p_t * v[t, d] over all keys (coalesced across the threads), then divides by the sum."""
import math

import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

THREADS = 256
SOFTCAP = 50.0  # Gemma-2 attn_logit_softcapping
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
SMEM_LIMIT = 48 * 1024  # shared memory per CTA without the opt-in
_compiled = {}


def _make_kernel(group: int, head_dim: int, max_tokens: int):
    scale_over_cap = 1.0 / (math.sqrt(head_dim) * SOFTCAP)

    @cute.kernel
    def softcap_kernel(gQ: cute.Tensor, gK: cute.Tensor, gV: cute.Tensor, gCL: cute.Tensor, gO: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        h, b, _ = cute.arch.block_idx()
        kvh = h // group

        smem = cutlass.memory.SmemAllocator()
        s_score = smem.allocate_tensor(cutlass.Float32, cute.make_layout(max_tokens))
        s_red = smem.allocate_tensor(cutlass.Float32, cute.make_layout(THREADS))
        s_stat = smem.allocate_tensor(cutlass.Float32, cute.make_layout(2))

        ctx = gCL[b]
        if ctx > max_tokens:
            ctx = cutlass.Int32(max_tokens)

        # pass 1: capped scores of this thread's keys, and their max
        part = cutlass.Float32(NEG_BIG)
        for t in range(tidx, ctx, THREADS):
            dot = cutlass.Float32(0.0)
            for d in range(head_dim):
                dot = dot + gQ[b, h, d].to(cutlass.Float32) * gK[b, t, kvh, d].to(cutlass.Float32)
            s = cutlass.Float32(SOFTCAP) * cute.math.tanh(dot * cutlass.Float32(scale_over_cap))
            s_score[t] = s
            part = cute.arch.fmax(part, s)
        s_red[tidx] = part
        cute.arch.sync_threads()
        if tidx == 0:
            m = cutlass.Float32(NEG_BIG)
            for w in range(THREADS):
                m = cute.arch.fmax(m, s_red[w])
            s_stat[0] = m
        cute.arch.sync_threads()

        # pass 2: unnormalised probabilities in place, and their sum
        m_all = s_stat[0]
        psum = cutlass.Float32(0.0)
        for t in range(tidx, ctx, THREADS):
            p = cute.math.exp(s_score[t] - m_all)
            s_score[t] = p
            psum = psum + p
        s_red[tidx] = psum
        cute.arch.sync_threads()
        if tidx == 0:
            l = cutlass.Float32(0.0)
            for w in range(THREADS):
                l = l + s_red[w]
            s_stat[1] = l
        cute.arch.sync_threads()

        # pass 3: this thread's output elements
        l_all = s_stat[1]
        for d in range(tidx, head_dim, THREADS):
            acc = cutlass.Float32(0.0)
            for t in range(ctx):
                acc = acc + s_score[t] * gV[b, t, kvh, d].to(cutlass.Float32)
            gO[b, h, d] = (acc / l_all).to(gO.element_type)

    @cute.jit
    def softcap_decode(mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mCL: cute.Tensor, mO: cute.Tensor):
        softcap_kernel(mQ, mK, mV, mCL, mO).launch(grid=(mQ.shape[1], mQ.shape[0], 1), block=(THREADS, 1, 1))

    return softcap_decode


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
    q = q.contiguous()
    k_cache = k_cache.contiguous()
    v_cache = v_cache.contiguous()
    context_lens = context_lens.contiguous()
    out = torch.empty_like(q)
    args = [from_dlpack(t) for t in (q, k_cache, v_cache, context_lens, out)]
    key = (batch, q_heads, head_dim, max_tokens, kv_heads)
    if key not in _compiled:
        fn = _make_kernel(q_heads // kv_heads, head_dim, max_tokens)
        _compiled[key] = cute.compile(fn, *args)
    _compiled[key](*args)
    return out
