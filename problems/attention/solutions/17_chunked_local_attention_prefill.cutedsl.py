"""CuTe DSL (sm_90a) solution: one CTA of 4 warps per (new token, KV head), serving the KV head's whole group of
query heads. Every thread scans cu_seqlens_q for the token's sequence, which gives its absolute position p and the
absolute position of the sequence's first packed key; the visible keys are the contiguous packed range from
max(chunk start floor(p / C) * C, first key) to p itself. Warp w walks that range at stride 4; each lane holds
head_dim / 32 elements (d = j * 32 + lane) of every query head of the group, the dot products are summed with warp
shuffles, and every warp keeps an fp32 online softmax (running max, running sum, output accumulator) per query
head. The 4 partial states are merged through shared memory at the end."""
import math

import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

NUM_WARPS = 4
THREADS = NUM_WARPS * 32
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _make_kernel(group: int, head_dim: int, batch: int, chunk: int):
    dpl = head_dim // 32  # elements of a head vector per lane
    combine_iters = (group * head_dim) // THREADS

    @cute.kernel
    def local_kernel(gQ: cute.Tensor, gK: cute.Tensor, gV: cute.Tensor, gCUQ: cute.Tensor, gCUK: cute.Tensor,
                     gSP: cute.Tensor, gO: cute.Tensor, scale: cutlass.Float32):
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

        # the token's sequence: the last cu_seqlens_q entry <= t
        s = cutlass.Int32(0)
        for i in cutlass.range_constexpr(batch):
            if gCUQ[i] <= t:
                s = cutlass.Int32(i)
        q_start = gCUQ[s]
        p = gSP[s] + (t - q_start)  # absolute position of the query
        k_start = gCUK[s]
        k_abs0 = gSP[s] + (gCUQ[s + 1] - q_start) - (gCUK[s + 1] - k_start)  # absolute position of the first key
        lo = (p // chunk) * chunk  # chunk start (p >= 0)
        if lo < k_abs0:
            lo = k_abs0
        first = k_start + (lo - k_abs0)
        last = k_start + (p - k_abs0)  # the query's own key, inclusive

        for kt in range(first + warp, last + 1, NUM_WARPS):
            for j in cutlass.range_constexpr(dpl):
                k_r[j] = gK[kt, kvh, j * 32 + lane].to(cutlass.Float32)
                v_r[j] = gV[kt, kvh, j * 32 + lane].to(cutlass.Float32)
            for g in cutlass.range_constexpr(group):
                sc = cutlass.Float32(0.0)
                for j in cutlass.range_constexpr(dpl):
                    sc = sc + q_r[g * dpl + j] * k_r[j]
                sc = cute.arch.warp_reduction_sum(sc)
                m_old = m_r[g]
                m_new = cute.arch.fmax(m_old, sc)
                corr = cute.math.exp(m_old - m_new)
                pr = cute.math.exp(sc - m_new)
                l_r[g] = l_r[g] * corr + pr
                m_r[g] = m_new
                for j in cutlass.range_constexpr(dpl):
                    acc_r[g * dpl + j] = acc_r[g * dpl + j] * corr + pr * v_r[j]

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
    def local_prefill(mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mCUQ: cute.Tensor, mCUK: cute.Tensor,
                      mSP: cute.Tensor, mO: cute.Tensor, scale: cutlass.Float32):
        local_kernel(mQ, mK, mV, mCUQ, mCUK, mSP, mO, scale).launch(
            grid=(mQ.shape[0], mK.shape[1], 1), block=(THREADS, 1, 1))

    return local_prefill


def solve(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
          cu_seqlens_k: torch.Tensor, start_pos: torch.Tensor, chunk_size: int):
    q_tokens, q_heads, head_dim = q.shape
    k_tokens, kv_heads, _ = k.shape
    batch = start_pos.shape[0]
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    group = q_heads // kv_heads
    if head_dim % 32 != 0 or (group * head_dim) % THREADS != 0:
        raise ValueError(f"head_dim must be a multiple of 32 and group * head_dim of {THREADS}")
    if k.shape != (k_tokens, kv_heads, head_dim) or v.shape != k.shape:
        raise ValueError("k and v must be (k_tokens, kv_heads, head_dim) with q's head_dim")
    if cu_seqlens_q.shape != (batch + 1,) or cu_seqlens_k.shape != (batch + 1,):
        raise ValueError("cu_seqlens_q and cu_seqlens_k must have batch + 1 entries")
    if q.dtype != torch.bfloat16 or k.dtype != torch.bfloat16 or v.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q, k and v")
    for x in (cu_seqlens_q, cu_seqlens_k, start_pos):
        if x.dtype != torch.int32:
            raise ValueError("expects int32 cu_seqlens and start positions")
    if q.numel() >= 2**31 or k.numel() >= 2**31:
        raise ValueError("q or k too large for 32-bit indexing")
    chunk = int(chunk_size)
    if chunk <= 0:
        raise ValueError("chunk_size must be positive")
    q = q.contiguous()
    k = k.contiguous()
    v = v.contiguous()
    out = torch.empty_like(q)
    scale = 1.0 / math.sqrt(head_dim)
    args = [from_dlpack(x) for x in (q, k, v, cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous(),
                                     start_pos.contiguous(), out)]
    key = (q_tokens, k_tokens, q_heads, kv_heads, head_dim, batch, chunk)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(group, head_dim, batch, chunk), *args, scale)
    _compiled[key](*args, scale)
    return out
