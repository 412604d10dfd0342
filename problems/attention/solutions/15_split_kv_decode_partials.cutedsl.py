"""CuTe DSL (sm_90a) solution: a 3-D grid of CTAs, one per (KV split of 512 tokens, KV head, sequence), each of 8
warps serving the KV head's whole group of query heads. Warp w walks the split's keys lo + w, lo + w + 8, ... that
lie before the sequence's length; each lane holds head_dim / 32 elements (d = j * 32 + lane) of every query head of
the group, the dot products are summed with warp shuffles, and every warp keeps an fp32 online softmax (running
max, running sum, output accumulator) per query head. The 8 warp states are merged through shared memory into the
split's normalised fp32 output and its log-sum-exp max + log(sum); a split with no keys (sum 0) writes output 0
and log-sum-exp -inf."""
import math

import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

SPLIT_SIZE = 512  # KV tokens per split
NUM_WARPS = 8
THREADS = NUM_WARPS * 32
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _make_kernel(group: int, head_dim: int, max_tokens: int):
    dpl = head_dim // 32  # elements of a head vector per lane
    combine_iters = (group * head_dim) // THREADS

    @cute.kernel
    def split_kernel(gQ: cute.Tensor, gK: cute.Tensor, gV: cute.Tensor, gCL: cute.Tensor, gO: cute.Tensor,
                     gLSE: cute.Tensor, scale: cutlass.Float32):
        tidx, _, _ = cute.arch.thread_idx()
        sp, kvh, b = cute.arch.block_idx()
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
                q_r[g * dpl + j] = gQ[b, kvh * group + g, j * 32 + lane].to(cutlass.Float32) * scale
                acc_r[g * dpl + j] = cutlass.Float32(0.0)
            m_r[g] = cutlass.Float32(NEG_BIG)
            l_r[g] = cutlass.Float32(0.0)

        lo = sp * SPLIT_SIZE
        hi = gCL[b]  # keys lo .. hi - 1 of this split: min(length, split end, capacity)
        if hi > lo + SPLIT_SIZE:
            hi = lo + SPLIT_SIZE
        if hi > max_tokens:
            hi = cutlass.Int32(max_tokens)

        for t in range(lo + warp, hi, NUM_WARPS):
            for j in cutlass.range_constexpr(dpl):
                k_r[j] = gK[b, t, kvh, j * 32 + lane].to(cutlass.Float32)
                v_r[j] = gV[b, t, kvh, j * 32 + lane].to(cutlass.Float32)
            for g in cutlass.range_constexpr(group):
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
            if l_all > cutlass.Float32(0.0):
                gO[b, kvh * group + g, sp, d] = o_all / l_all
                if d == 0:
                    gLSE[b, kvh * group + g, sp] = m_all + cute.math.log(l_all)
            else:
                gO[b, kvh * group + g, sp, d] = cutlass.Float32(0.0)
                if d == 0:
                    gLSE[b, kvh * group + g, sp] = cutlass.Float32(float("-inf"))

    @cute.jit
    def split_partials(mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mCL: cute.Tensor, mO: cute.Tensor,
                       mLSE: cute.Tensor, scale: cutlass.Float32):
        split_kernel(mQ, mK, mV, mCL, mO, mLSE, scale).launch(
            grid=(mO.shape[2], mK.shape[2], mQ.shape[0]), block=(THREADS, 1, 1))

    return split_partials


def solve(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, context_lens: torch.Tensor):
    batch, q_heads, head_dim = q.shape
    _, max_tokens, kv_heads, _ = k_cache.shape
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    group = q_heads // kv_heads
    if head_dim % 32 != 0 or (group * head_dim) % THREADS != 0:
        raise ValueError(f"head_dim must be a multiple of 32 and group * head_dim of {THREADS}")
    if k_cache.shape != (batch, max_tokens, kv_heads, head_dim) or v_cache.shape != k_cache.shape:
        raise ValueError("k_cache and v_cache must be (batch, max_context, kv_heads, head_dim)")
    if q.dtype != torch.bfloat16 or k_cache.dtype != torch.bfloat16 or v_cache.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q and caches")
    if context_lens.dtype != torch.int32:
        raise ValueError("expects int32 context lengths")
    if k_cache.numel() >= 2**31:
        raise ValueError("KV cache too large for 32-bit indexing")
    num_splits = (max_tokens + SPLIT_SIZE - 1) // SPLIT_SIZE
    q = q.contiguous()
    k_cache = k_cache.contiguous()
    v_cache = v_cache.contiguous()
    context_lens = context_lens.contiguous()
    out = torch.empty(batch, q_heads, num_splits, head_dim, dtype=torch.float32, device=q.device)
    lse = torch.empty(batch, q_heads, num_splits, dtype=torch.float32, device=q.device)
    scale = 1.0 / math.sqrt(head_dim)
    args = [from_dlpack(t) for t in (q, k_cache, v_cache, context_lens, out, lse)]
    key = (batch, q_heads, head_dim, max_tokens, kv_heads)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(group, head_dim, max_tokens), *args, scale)
    _compiled[key](*args, scale)
    return out, lse
