"""CuTe DSL (sm_90a) solution: one CTA of 4 warps per (sequence, KV head), serving the KV head's whole group of
query heads. Each lane holds head_dim / 32 elements (d = j * 32 + lane) of a head vector, so both halves of every
rotary pair (d, d + head_dim / 2) sit in the same lane: the CTA rotates the group's queries (rounded to bf16 like
the real op's rotated query) and the new key (bf16) in registers with cos/sin at position cache_lens[b], and warp 0
appends the rotated key and the value to the caches. Warp w walks the earlier cached keys t = w, w + 4, ... <
cache_lens[b], warp 0 also scores the new key from its registers; dot products are summed with warp shuffles and
every warp keeps an fp32 online softmax (running max, running sum, output accumulator) per query head. The 4
partial states are merged through shared memory at the end."""
import math

import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

NUM_WARPS = 4
THREADS = NUM_WARPS * 32
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _make_kernel(group: int, head_dim: int):
    dpl = head_dim // 32  # elements of a head vector per lane
    hp = dpl // 2  # register pairs (j, j + hp) are rotary pairs (d, d + head_dim / 2)
    half = head_dim // 2
    combine_iters = (group * head_dim) // THREADS

    @cute.kernel
    def rope_kernel(gQ: cute.Tensor, gKN: cute.Tensor, gVN: cute.Tensor, gKC: cute.Tensor, gVC: cute.Tensor,
                    gCL: cute.Tensor, gCS: cute.Tensor, gO: cute.Tensor, scale: cutlass.Float32):
        tidx, _, _ = cute.arch.thread_idx()
        kvh, b, _ = cute.arch.block_idx()
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
        cs_r = cute.make_rmem_tensor(2 * hp, cutlass.Float32)  # cos of pair j at j, sin at hp + j
        kb = cute.make_rmem_tensor(dpl, cutlass.BFloat16)  # the rotated new key, as stored

        p = gCL[b]
        for j in cutlass.range_constexpr(hp):
            cs_r[j] = gCS[p, j * 32 + lane]
            cs_r[hp + j] = gCS[p, half + j * 32 + lane]
        for g in cutlass.range_constexpr(group):
            h = kvh * group + g
            for j in cutlass.range_constexpr(hp):
                x1 = gQ[b, h, j * 32 + lane].to(cutlass.Float32)
                x2 = gQ[b, h, half + j * 32 + lane].to(cutlass.Float32)
                r1 = (x1 * cs_r[j] - x2 * cs_r[hp + j]).to(cutlass.BFloat16)
                r2 = (x2 * cs_r[j] + x1 * cs_r[hp + j]).to(cutlass.BFloat16)
                q_r[g * dpl + j] = r1.to(cutlass.Float32) * scale
                q_r[g * dpl + hp + j] = r2.to(cutlass.Float32) * scale
            for j in cutlass.range_constexpr(dpl):
                acc_r[g * dpl + j] = cutlass.Float32(0.0)
            m_r[g] = cutlass.Float32(NEG_BIG)
            l_r[g] = cutlass.Float32(0.0)

        # earlier keys of this warp: t = warp, warp + NUM_WARPS, ... < p
        for t in range(warp, p, NUM_WARPS):
            for j in cutlass.range_constexpr(dpl):
                k_r[j] = gKC[b, t, kvh, j * 32 + lane].to(cutlass.Float32)
                v_r[j] = gVC[b, t, kvh, j * 32 + lane].to(cutlass.Float32)
            for g in cutlass.range_constexpr(group):
                s = cutlass.Float32(0.0)
                for j in cutlass.range_constexpr(dpl):
                    s = s + q_r[g * dpl + j] * k_r[j]
                s = cute.arch.warp_reduction_sum(s)
                m_old = m_r[g]
                m_new = cute.arch.fmax(m_old, s)
                corr = cute.math.exp(m_old - m_new)
                pr = cute.math.exp(s - m_new)
                l_r[g] = l_r[g] * corr + pr
                m_r[g] = m_new
                for j in cutlass.range_constexpr(dpl):
                    acc_r[g * dpl + j] = acc_r[g * dpl + j] * corr + pr * v_r[j]

        if warp == 0:
            # rotate the new key, append it and the value at slot p, and score it from registers
            for j in cutlass.range_constexpr(hp):
                y1 = gKN[b, kvh, j * 32 + lane].to(cutlass.Float32)
                y2 = gKN[b, kvh, half + j * 32 + lane].to(cutlass.Float32)
                kb[j] = (y1 * cs_r[j] - y2 * cs_r[hp + j]).to(cutlass.BFloat16)
                kb[hp + j] = (y2 * cs_r[j] + y1 * cs_r[hp + j]).to(cutlass.BFloat16)
            for j in cutlass.range_constexpr(dpl):
                vn = gVN[b, kvh, j * 32 + lane]
                gKC[b, p, kvh, j * 32 + lane] = kb[j]
                gVC[b, p, kvh, j * 32 + lane] = vn
                k_r[j] = kb[j].to(cutlass.Float32)
                v_r[j] = vn.to(cutlass.Float32)
            for g in cutlass.range_constexpr(group):
                s = cutlass.Float32(0.0)
                for j in cutlass.range_constexpr(dpl):
                    s = s + q_r[g * dpl + j] * k_r[j]
                s = cute.arch.warp_reduction_sum(s)
                m_old = m_r[g]
                m_new = cute.arch.fmax(m_old, s)
                corr = cute.math.exp(m_old - m_new)
                pr = cute.math.exp(s - m_new)
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
            gO[b, kvh * group + g, d] = (o_all / l_all).to(gO.element_type)

    @cute.jit
    def rope_decode(mQ: cute.Tensor, mKN: cute.Tensor, mVN: cute.Tensor, mKC: cute.Tensor, mVC: cute.Tensor,
                    mCL: cute.Tensor, mCS: cute.Tensor, mO: cute.Tensor, scale: cutlass.Float32):
        rope_kernel(mQ, mKN, mVN, mKC, mVC, mCL, mCS, mO, scale).launch(
            grid=(mKN.shape[1], mQ.shape[0], 1), block=(THREADS, 1, 1))

    return rope_decode


def solve(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
          cache_lens: torch.Tensor, cos_sin_cache: torch.Tensor):
    batch, q_heads, head_dim = q.shape
    _, max_tokens, kv_heads, _ = k_cache.shape
    max_pos = cos_sin_cache.shape[0]
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    group = q_heads // kv_heads
    if head_dim % 64 != 0 or (group * head_dim) % THREADS != 0:
        raise ValueError(f"head_dim must be a multiple of 64 and group * head_dim of {THREADS}")
    if k.shape != (batch, kv_heads, head_dim) or v.shape != k.shape:
        raise ValueError("k and v must be (batch, kv_heads, head_dim)")
    if k_cache.shape != (batch, max_tokens, kv_heads, head_dim) or v_cache.shape != k_cache.shape:
        raise ValueError("k_cache and v_cache must be (batch, max_context, kv_heads, head_dim)")
    if cos_sin_cache.shape[1] != head_dim or cos_sin_cache.dtype != torch.float32:
        raise ValueError("cos_sin_cache must be float32 (max_pos, head_dim)")
    for x in (q, k, v, k_cache, v_cache):
        if x.dtype != torch.bfloat16:
            raise ValueError("expects bfloat16 q, k, v and caches")
    if not (k_cache.is_contiguous() and v_cache.is_contiguous()):
        raise ValueError("the caches are updated in place and must be contiguous")
    if cache_lens.dtype != torch.int32:
        raise ValueError("expects int32 cache lengths")
    if k_cache.numel() >= 2**31:
        raise ValueError("KV cache too large for 32-bit indexing")
    out = torch.empty_like(q)
    scale = 1.0 / math.sqrt(head_dim)
    args = [from_dlpack(x) for x in (q.contiguous(), k.contiguous(), v.contiguous(), k_cache, v_cache,
                                     cache_lens.contiguous(), cos_sin_cache.contiguous(), out)]
    key = (batch, q_heads, kv_heads, head_dim, max_tokens, max_pos)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(group, head_dim), *args, scale)
    _compiled[key](*args, scale)
    return out
