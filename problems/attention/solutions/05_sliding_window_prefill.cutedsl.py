"""CuTe DSL (sm_90a) solution: one CTA of 8 warps per (query position i, KV head, sequence), serving the KV head's
whole group of query heads. Warp w walks the band's keys lo + w, lo + w + 8, ... up to i, with
lo = max(0, i - window + 1). Each lane holds head_dim / 32 elements (d = j * 32 + lane) of every query head of the
group, the dot products are summed with warp shuffles, and every warp keeps an fp32 online softmax (running max,
running sum, output accumulator) per query head. The 8 partial states are merged through shared memory at the
end."""
import math

import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

NUM_WARPS = 8
THREADS = NUM_WARPS * 32
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _make_kernel(group: int, head_dim: int, window: int):
    dpl = head_dim // 32  # elements of a head vector per lane
    combine_iters = (group * head_dim) // THREADS

    @cute.kernel
    def swa_kernel(gQ: cute.Tensor, gK: cute.Tensor, gV: cute.Tensor, gO: cute.Tensor, scale: cutlass.Float32):
        tidx, _, _ = cute.arch.thread_idx()
        i, kvh, b = cute.arch.block_idx()
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
                q_r[g * dpl + j] = gQ[b, kvh * group + g, i, j * 32 + lane].to(cutlass.Float32) * scale
                acc_r[g * dpl + j] = cutlass.Float32(0.0)
            m_r[g] = cutlass.Float32(NEG_BIG)
            l_r[g] = cutlass.Float32(0.0)

        lo = i - (window - 1)  # first key of the band
        if lo < 0:
            lo = cutlass.Int32(0)

        for s in range(lo + warp, i + 1, NUM_WARPS):
            for j in cutlass.range_constexpr(dpl):
                k_r[j] = gK[b, kvh, s, j * 32 + lane].to(cutlass.Float32)
                v_r[j] = gV[b, kvh, s, j * 32 + lane].to(cutlass.Float32)
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
            gO[b, kvh * group + g, i, d] = (o_all / l_all).to(gO.element_type)

    @cute.jit
    def swa(mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mO: cute.Tensor, scale: cutlass.Float32):
        swa_kernel(mQ, mK, mV, mO, scale).launch(
            grid=(mQ.shape[2], mK.shape[1], mQ.shape[0]), block=(THREADS, 1, 1))

    return swa


def solve(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int):
    batch, q_heads, seq, head_dim = q.shape
    kv_heads = k.shape[1]
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    group = q_heads // kv_heads
    if head_dim % 32 != 0 or (group * head_dim) % THREADS != 0:
        raise ValueError(f"head_dim must be a multiple of 32 and group * head_dim of {THREADS}")
    if k.shape != (batch, kv_heads, seq, head_dim) or v.shape != k.shape:
        raise ValueError("q, k and v must share batch, seq and head_dim; k and v the same shape")
    if q.dtype != torch.bfloat16 or k.dtype != torch.bfloat16 or v.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q, k and v")
    if not isinstance(window, int) or window < 1:
        raise ValueError("window must be a positive int")
    if q.numel() >= 2**31:
        raise ValueError("q too large for 32-bit indexing")
    q = q.contiguous()
    k = k.contiguous()
    v = v.contiguous()
    out = torch.empty_like(q)
    scale = 1.0 / math.sqrt(head_dim)
    args = [from_dlpack(t) for t in (q, k, v, out)]
    key = (batch, q_heads, kv_heads, seq, head_dim, window)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(group, head_dim, window), *args, scale)
    _compiled[key](*args, scale)
    return out
