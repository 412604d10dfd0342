"""CuTe DSL (sm_90a) solution: one CTA of 8 warps per (sequence, KV head), serving the KV head's whole group of
query heads. Warp w walks the keys t = w, w + 8, ... of its sequence through the block table; each lane converts
head_dim / 32 float8_e4m3fn codes (d = j * 32 + lane) of the token's K and V rows to fp32 in registers, the raw
q . code dot products are summed with warp shuffles and multiplied by the token's K scale, and the probability is
multiplied by its V scale before it weights the V codes. Every warp keeps an fp32 online softmax (running max,
running sum, output accumulator) per query head; the 8 partial states are merged through shared memory at the
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


def _make_kernel(group: int, head_dim: int, page_size: int, max_tokens: int):
    dpl = head_dim // 32  # elements of a head vector per lane
    combine_iters = (group * head_dim + THREADS - 1) // THREADS

    @cute.kernel
    def decode_kernel(gQ: cute.Tensor, gK: cute.Tensor, gV: cute.Tensor, gKS: cute.Tensor, gVS: cute.Tensor,
                      gBT: cute.Tensor, gCL: cute.Tensor, gO: cute.Tensor, scale: cutlass.Float32):
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
        for g in cutlass.range_constexpr(group):
            for j in cutlass.range_constexpr(dpl):
                q_r[g * dpl + j] = gQ[b, kvh * group + g, j * 32 + lane].to(cutlass.Float32)
                acc_r[g * dpl + j] = cutlass.Float32(0.0)
            m_r[g] = cutlass.Float32(NEG_BIG)
            l_r[g] = cutlass.Float32(0.0)

        ctx = gCL[b]
        if ctx > max_tokens:
            ctx = cutlass.Int32(max_tokens)

        for t in range(warp, ctx, NUM_WARPS):
            page = gBT[b, t // page_size]
            slot = t % page_size
            for j in cutlass.range_constexpr(dpl):
                k_r[j] = gK[page, slot, kvh, j * 32 + lane].to(cutlass.Float32)
                v_r[j] = gV[page, slot, kvh, j * 32 + lane].to(cutlass.Float32)
            ks = gKS[page, slot, kvh] * scale
            vs = gVS[page, slot, kvh]
            for g in cutlass.range_constexpr(group):
                s = cutlass.Float32(0.0)
                for j in cutlass.range_constexpr(dpl):
                    s = s + q_r[g * dpl + j] * k_r[j]
                s = cute.arch.warp_reduction_sum(s) * ks
                m_old = m_r[g]
                m_new = cute.arch.fmax(m_old, s)
                corr = cute.math.exp(m_old - m_new)
                p = cute.math.exp(s - m_new)
                l_r[g] = l_r[g] * corr + p
                m_r[g] = m_new
                pv = p * vs
                for j in cutlass.range_constexpr(dpl):
                    acc_r[g * dpl + j] = acc_r[g * dpl + j] * corr + pv * v_r[j]

        for g in cutlass.range_constexpr(group):
            if lane == 0:
                s_m[warp * group + g] = m_r[g]
                s_l[warp * group + g] = l_r[g]
            for j in cutlass.range_constexpr(dpl):
                s_acc[(warp * group + g) * head_dim + j * 32 + lane] = acc_r[g * dpl + j]
        cute.arch.sync_threads()

        for it in cutlass.range_constexpr(combine_iters):
            e = it * THREADS + tidx
            if e < group * head_dim:
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
    def decode(mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mKS: cute.Tensor, mVS: cute.Tensor,
               mBT: cute.Tensor, mCL: cute.Tensor, mO: cute.Tensor, scale: cutlass.Float32):
        decode_kernel(mQ, mK, mV, mKS, mVS, mBT, mCL, mO, scale).launch(
            grid=(mK.shape[2], mQ.shape[0], 1), block=(THREADS, 1, 1))

    return decode


def solve(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, k_scale: torch.Tensor,
          v_scale: torch.Tensor, block_tables: torch.Tensor, context_lens: torch.Tensor):
    batch, q_heads, head_dim = q.shape
    num_pages, page_size, kv_heads, _ = k_cache.shape
    max_pages = block_tables.shape[1]
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    group = q_heads // kv_heads
    if head_dim % 32 != 0:
        raise ValueError("head_dim must be a multiple of 32")
    if NUM_WARPS * group * (head_dim + 2) * 4 > 48 * 1024:
        raise ValueError("the KV group's partial states do not fit in 48 KiB of shared memory")
    if q.dtype != torch.bfloat16:
        raise ValueError("expects a bfloat16 q")
    if k_cache.dtype != torch.float8_e4m3fn or v_cache.dtype != torch.float8_e4m3fn or v_cache.shape != k_cache.shape:
        raise ValueError("expects float8_e4m3fn K and V caches of one shape")
    if k_scale.dtype != torch.float32 or v_scale.dtype != torch.float32 or \
            tuple(k_scale.shape) != (num_pages, page_size, kv_heads) or v_scale.shape != k_scale.shape:
        raise ValueError("expects float32 scales shaped (num_pages, page_size, kv_heads)")
    if block_tables.dtype != torch.int32 or context_lens.dtype != torch.int32:
        raise ValueError("expects int32 block tables and context lengths")
    if k_cache.numel() >= 2**31:
        raise ValueError("KV cache too large for 32-bit indexing")
    tensors = [t.contiguous() for t in (q, k_cache, v_cache, k_scale, v_scale, block_tables, context_lens)]
    out = torch.empty_like(tensors[0])
    scale = 1.0 / math.sqrt(head_dim)
    args = [from_dlpack(t) for t in tensors] + [from_dlpack(out)]
    key = (batch, q_heads, head_dim, num_pages, page_size, kv_heads, max_pages)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(group, head_dim, page_size, max_pages * page_size), *args, scale)
    _compiled[key](*args, scale)
    return out
