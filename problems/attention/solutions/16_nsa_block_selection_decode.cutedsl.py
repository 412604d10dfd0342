"""CuTe DSL (sm_90a) solution: one CTA of 8 warps per (sequence, block of 4 query heads of one KV group); the
block's heads share every gathered key, since the whole group attends to its KV head's selected blocks. The CTA
walks the selection slots in order and skips unused (-1) slots; inside a selected 64-token block, warp w takes the
tokens block * 64 + w, + 8, ... that lie before the sequence's length, read from the head-major cache. Each lane
holds head_dim / 32 elements (d = j * 32 + lane) of every head of the block, the dot products are summed with warp
shuffles, and every warp keeps an fp32 online softmax (running max, running sum, output accumulator) per head;
the 8 partial states are merged through shared memory at the end."""
import math

import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

BLOCK_SIZE = 64  # NSA selection block size
NUM_WARPS = 8
THREADS = NUM_WARPS * 32
HEADS_PER_CTA = 4
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _make_kernel(group: int, head_dim: int, max_tokens: int, top_n: int):
    hb = HEADS_PER_CTA
    dpl = head_dim // 32  # elements of a head vector per lane
    combine_iters = (hb * head_dim) // THREADS

    @cute.kernel
    def select_kernel(gQ: cute.Tensor, gK: cute.Tensor, gV: cute.Tensor, gBI: cute.Tensor, gCL: cute.Tensor,
                      gO: cute.Tensor, scale: cutlass.Float32):
        tidx, _, _ = cute.arch.thread_idx()
        hblk, b, _ = cute.arch.block_idx()
        warp = tidx // 32
        lane = tidx % 32
        kvh = (hblk * hb) // group

        smem = cutlass.memory.SmemAllocator()
        s_m = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS * hb))
        s_l = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS * hb))
        s_acc = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS * hb * head_dim))

        q_r = cute.make_rmem_tensor(hb * dpl, cutlass.Float32)
        acc_r = cute.make_rmem_tensor(hb * dpl, cutlass.Float32)
        m_r = cute.make_rmem_tensor(hb, cutlass.Float32)
        l_r = cute.make_rmem_tensor(hb, cutlass.Float32)
        k_r = cute.make_rmem_tensor(dpl, cutlass.Float32)
        v_r = cute.make_rmem_tensor(dpl, cutlass.Float32)
        for g in cutlass.range_constexpr(hb):
            for j in cutlass.range_constexpr(dpl):
                q_r[g * dpl + j] = gQ[b, hblk * hb + g, j * 32 + lane].to(cutlass.Float32) * scale
                acc_r[g * dpl + j] = cutlass.Float32(0.0)
            m_r[g] = cutlass.Float32(NEG_BIG)
            l_r[g] = cutlass.Float32(0.0)

        ctx = gCL[b]
        if ctx > max_tokens:
            ctx = cutlass.Int32(max_tokens)

        for i in range(top_n):
            blk = gBI[b, kvh, i]
            if blk >= 0:  # the same for the whole CTA
                # tokens of this warp in the block, clipped to the sequence's length (the same for every lane)
                hi = blk * BLOCK_SIZE + BLOCK_SIZE
                if hi > ctx:
                    hi = ctx
                for t in range(blk * BLOCK_SIZE + warp, hi, NUM_WARPS):
                    for j in cutlass.range_constexpr(dpl):
                        k_r[j] = gK[b, kvh, t, j * 32 + lane].to(cutlass.Float32)
                        v_r[j] = gV[b, kvh, t, j * 32 + lane].to(cutlass.Float32)
                    for g in cutlass.range_constexpr(hb):
                        s = cutlass.Float32(0.0)
                        for j in cutlass.range_constexpr(dpl):
                            s = s + q_r[g * dpl + j] * k_r[j]
                        s = cute.arch.warp_reduction_sum(s)
                        m_old = m_r[g]
                        m_new = cute.arch.fmax(m_old, s)
                        corr = cute.math.exp(m_old - m_new)
                        p = cute.math.exp(s - m_new)
                        l_r[g] = l_r[g] * corr + p
                        m_r[g] = m_new
                        for j in cutlass.range_constexpr(dpl):
                            acc_r[g * dpl + j] = acc_r[g * dpl + j] * corr + p * v_r[j]

        for g in cutlass.range_constexpr(hb):
            if lane == 0:
                s_m[warp * hb + g] = m_r[g]
                s_l[warp * hb + g] = l_r[g]
            for j in cutlass.range_constexpr(dpl):
                s_acc[(warp * hb + g) * head_dim + j * 32 + lane] = acc_r[g * dpl + j]
        cute.arch.sync_threads()

        for it in cutlass.range_constexpr(combine_iters):
            e = it * THREADS + tidx
            g = e // head_dim
            d = e % head_dim
            m_all = cutlass.Float32(NEG_BIG)
            for w in cutlass.range_constexpr(NUM_WARPS):
                m_all = cute.arch.fmax(m_all, s_m[w * hb + g])
            l_all = cutlass.Float32(0.0)
            o_all = cutlass.Float32(0.0)
            for w in cutlass.range_constexpr(NUM_WARPS):
                f = cute.math.exp(s_m[w * hb + g] - m_all)
                l_all = l_all + s_l[w * hb + g] * f
                o_all = o_all + s_acc[(w * hb + g) * head_dim + d] * f
            gO[b, hblk * hb + g, d] = (o_all / l_all).to(gO.element_type)

    @cute.jit
    def select_decode(mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mBI: cute.Tensor, mCL: cute.Tensor,
                      mO: cute.Tensor, scale: cutlass.Float32):
        select_kernel(mQ, mK, mV, mBI, mCL, mO, scale).launch(
            grid=(mQ.shape[1] // hb, mQ.shape[0], 1), block=(THREADS, 1, 1))

    return select_decode


def solve(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_indices: torch.Tensor,
          context_lens: torch.Tensor):
    batch, q_heads, head_dim = q.shape
    _, kv_heads, max_tokens, _ = k_cache.shape
    top_n = block_indices.shape[2]
    if q_heads % kv_heads != 0 or (q_heads // kv_heads) % HEADS_PER_CTA != 0:
        raise ValueError(f"query heads must be a multiple of KV heads, the group a multiple of {HEADS_PER_CTA}")
    group = q_heads // kv_heads
    if head_dim % 32 != 0 or (HEADS_PER_CTA * head_dim) % THREADS != 0:
        raise ValueError(f"head_dim must be a multiple of 32 and {HEADS_PER_CTA} * head_dim of {THREADS}")
    if k_cache.shape != (batch, kv_heads, max_tokens, head_dim) or v_cache.shape != k_cache.shape:
        raise ValueError("k_cache and v_cache must be (batch, kv_heads, max_context, head_dim)")
    if block_indices.shape[:2] != (batch, kv_heads):
        raise ValueError("block_indices must be (batch, kv_heads, top_n)")
    if q.dtype != torch.bfloat16 or k_cache.dtype != torch.bfloat16 or v_cache.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q and caches")
    if block_indices.dtype != torch.int32 or context_lens.dtype != torch.int32:
        raise ValueError("expects int32 block indices and context lengths")
    if k_cache.numel() >= 2**31:
        raise ValueError("KV cache too large for 32-bit indexing")
    q = q.contiguous()
    k_cache = k_cache.contiguous()
    v_cache = v_cache.contiguous()
    block_indices = block_indices.contiguous()
    context_lens = context_lens.contiguous()
    out = torch.empty_like(q)
    scale = 1.0 / math.sqrt(head_dim)
    args = [from_dlpack(t) for t in (q, k_cache, v_cache, block_indices, context_lens, out)]
    key = (batch, q_heads, head_dim, kv_heads, max_tokens, top_n)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(group, head_dim, max_tokens, top_n), *args, scale)
    _compiled[key](*args, scale)
    return out
