"""CuTe DSL (sm_90a) solution: one CTA of 8 warps per (chunk token, KV head), serving the KV head's whole group of
query heads. Every thread scans cu_seqlens for the token's sequence b, its chunk start and its prefix length P. Warp
w then carries one fp32 online softmax (running max, running sum, output accumulator per query head) first over the
prefix keys u = w, w + 8, ... < P, read in place through block_tables[b] (page u // page_size, slot
u % page_size), and straight on over the chunk keys start + w, start + w + 8, ... up to the token itself. Each lane
holds head_dim / 32 elements (d = j * 32 + lane) of every query head of the group and the dot products are summed
with warp shuffles. The 8 partial states are merged through shared memory at the end."""
import math

import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

NUM_WARPS = 8
THREADS = NUM_WARPS * 32
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _make_kernel(group: int, head_dim: int, batch: int, page_size: int, max_prefix: int):
    dpl = head_dim // 32  # elements of a head vector per lane
    combine_iters = (group * head_dim) // THREADS

    @cute.kernel
    def prefill_kernel(gQ: cute.Tensor, gKN: cute.Tensor, gVN: cute.Tensor, gKC: cute.Tensor, gVC: cute.Tensor,
                       gBT: cute.Tensor, gPL: cute.Tensor, gCU: cute.Tensor, gO: cute.Tensor,
                       scale: cutlass.Float32):
        tidx, _, _ = cute.arch.thread_idx()
        t, kvh, _ = cute.arch.block_idx()
        warp = tidx // 32
        lane = tidx % 32

        smem = cutlass.memory.SmemAllocator()
        s_m = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS * group))
        s_l = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS * group))
        s_acc = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS * group * head_dim))

        q_r = cute.make_rmem_tensor(group * dpl, cutlass.Float32)
        acc_r = cute.make_rmem_tensor(group * dpl, cutlass.Float32)
        m_r = cute.make_rmem_tensor(group, cutlass.Float32)
        l_r = cute.make_rmem_tensor(group, cutlass.Float32)
        k_r = cute.make_rmem_tensor(dpl, cutlass.Float32)
        v_r = cute.make_rmem_tensor(dpl, cutlass.Float32)
        for g in cutlass.range_constexpr(group):
            for j in cutlass.range_constexpr(dpl):
                q_r[g * dpl + j] = gQ[t, kvh * group + g, j * 32 + lane].to(cutlass.Float32) * scale
                acc_r[g * dpl + j] = cutlass.Float32(0.0)
            m_r[g] = cutlass.Float32(NEG_BIG)
            l_r[g] = cutlass.Float32(0.0)

        # the chunk of token t starts at the last cu_seqlens entry <= t
        b = cutlass.Int32(0)
        start = cutlass.Int32(0)
        for i in cutlass.range_constexpr(batch):
            c = gCU[i]
            if c <= t:
                start = c
                b = cutlass.Int32(i)
        plen = gPL[b]
        if plen > max_prefix:
            plen = cutlass.Int32(max_prefix)

        # prefix keys of this warp, in place through the block table
        for u in range(warp, plen, NUM_WARPS):
            page = gBT[b, u // page_size]
            slot = u % page_size
            for j in cutlass.range_constexpr(dpl):
                k_r[j] = gKC[page, slot, kvh, j * 32 + lane].to(cutlass.Float32)
                v_r[j] = gVC[page, slot, kvh, j * 32 + lane].to(cutlass.Float32)
            for g in cutlass.range_constexpr(group):
                sc = cutlass.Float32(0.0)
                for j in cutlass.range_constexpr(dpl):
                    sc = sc + q_r[g * dpl + j] * k_r[j]
                sc = cute.arch.warp_reduction_sum(sc)
                m_old = m_r[g]
                m_new = cute.arch.fmax(m_old, sc)
                corr = cute.math.exp(m_old - m_new)
                p = cute.math.exp(sc - m_new)
                l_r[g] = l_r[g] * corr + p
                m_r[g] = m_new
                for j in cutlass.range_constexpr(dpl):
                    acc_r[g * dpl + j] = acc_r[g * dpl + j] * corr + p * v_r[j]

        # then the chunk's own keys of this warp, causal, into the same softmax state
        for s in range(start + warp, t + 1, NUM_WARPS):
            for j in cutlass.range_constexpr(dpl):
                k_r[j] = gKN[s, kvh, j * 32 + lane].to(cutlass.Float32)
                v_r[j] = gVN[s, kvh, j * 32 + lane].to(cutlass.Float32)
            for g in cutlass.range_constexpr(group):
                sc = cutlass.Float32(0.0)
                for j in cutlass.range_constexpr(dpl):
                    sc = sc + q_r[g * dpl + j] * k_r[j]
                sc = cute.arch.warp_reduction_sum(sc)
                m_old = m_r[g]
                m_new = cute.arch.fmax(m_old, sc)
                corr = cute.math.exp(m_old - m_new)
                p = cute.math.exp(sc - m_new)
                l_r[g] = l_r[g] * corr + p
                m_r[g] = m_new
                for j in cutlass.range_constexpr(dpl):
                    acc_r[g * dpl + j] = acc_r[g * dpl + j] * corr + p * v_r[j]

        for g in cutlass.range_constexpr(group):
            if lane == 0:
                s_m[warp * group + g] = m_r[g]
                s_l[warp * group + g] = l_r[g]
            for j in cutlass.range_constexpr(dpl):
                s_acc[(warp * group + g) * head_dim + j * 32 + lane] = acc_r[g * dpl + j]
        cute.arch.sync_threads()

        for it in cutlass.range_constexpr(combine_iters):
            e = it * THREADS + tidx
            g = e // head_dim
            d = e % head_dim
            m_all = cutlass.Float32(NEG_BIG)
            for w in cutlass.range_constexpr(NUM_WARPS):
                m_all = cute.arch.fmax(m_all, s_m[w * group + g])
            l_all = cutlass.Float32(0.0)
            o_all = cutlass.Float32(0.0)
            for w in cutlass.range_constexpr(NUM_WARPS):
                f = cute.math.exp(s_m[w * group + g] - m_all)
                l_all = l_all + s_l[w * group + g] * f
                o_all = o_all + s_acc[(w * group + g) * head_dim + d] * f
            gO[t, kvh * group + g, d] = (o_all / l_all).to(gO.element_type)

    @cute.jit
    def chunked_prefill(mQ: cute.Tensor, mKN: cute.Tensor, mVN: cute.Tensor, mKC: cute.Tensor, mVC: cute.Tensor,
                        mBT: cute.Tensor, mPL: cute.Tensor, mCU: cute.Tensor, mO: cute.Tensor,
                        scale: cutlass.Float32):
        prefill_kernel(mQ, mKN, mVN, mKC, mVC, mBT, mPL, mCU, mO, scale).launch(
            grid=(mQ.shape[0], mKN.shape[1], 1), block=(THREADS, 1, 1))

    return chunked_prefill


def solve(q: torch.Tensor, k_new: torch.Tensor, v_new: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
          block_tables: torch.Tensor, prefix_lens: torch.Tensor, cu_seqlens: torch.Tensor):
    total, q_heads, head_dim = q.shape
    num_pages, page_size, kv_heads, _ = k_cache.shape
    batch, max_pages = block_tables.shape
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    group = q_heads // kv_heads
    if head_dim % 32 != 0 or (group * head_dim) % THREADS != 0:
        raise ValueError(f"head_dim must be a multiple of 32 and group * head_dim of {THREADS}")
    if tuple(k_new.shape) != (total, kv_heads, head_dim) or v_new.shape != k_new.shape:
        raise ValueError("k_new and v_new must be (total_tokens, kv_heads, head_dim)")
    if v_cache.shape != k_cache.shape or k_cache.shape[3] != head_dim:
        raise ValueError("k_cache and v_cache must be (num_pages, page_size, kv_heads, head_dim)")
    if tuple(prefix_lens.shape) != (batch,) or tuple(cu_seqlens.shape) != (batch + 1,):
        raise ValueError("prefix_lens must be (batch,) and cu_seqlens (batch + 1,)")
    if any(t.dtype != torch.bfloat16 for t in (q, k_new, v_new, k_cache, v_cache)):
        raise ValueError("expects bfloat16 q, k_new, v_new and caches")
    if any(t.dtype != torch.int32 for t in (block_tables, prefix_lens, cu_seqlens)):
        raise ValueError("expects int32 block tables, prefix lengths and cu_seqlens")
    if k_cache.numel() >= 2**31 or q.numel() >= 2**31:
        raise ValueError("tensors too large for 32-bit indexing")
    tensors = [t.contiguous() for t in (q, k_new, v_new, k_cache, v_cache, block_tables, prefix_lens, cu_seqlens)]
    out = torch.empty_like(tensors[0])
    scale = 1.0 / math.sqrt(head_dim)
    args = [from_dlpack(t) for t in tensors] + [from_dlpack(out)]
    key = (total, q_heads, kv_heads, head_dim, num_pages, page_size, batch, max_pages)
    if key not in _compiled:
        fn = _make_kernel(group, head_dim, batch, page_size, max_pages * page_size)
        _compiled[key] = cute.compile(fn, *args, scale)
    _compiled[key](*args, scale)
    return out
