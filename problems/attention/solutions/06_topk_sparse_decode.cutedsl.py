"""CuTe DSL (sm_90a) solution: one CTA of 4 warps per (block of 4 heads, sequence); the block's heads share every
gathered row, since all heads attend to the same selected tokens. Warp w walks the index slots k = w, w + 4, ...,
skips unused (-1) slots and gathers pool row indices[b, k]; each lane holds 576 / 32 = 18 query elements
(c = j * 32 + lane) of every head of the block and reuses its first 16 key elements as the value (the latent part).
Dot products are summed with warp shuffles and every warp keeps an fp32 online softmax (running max, running sum,
512-dim accumulator) per head; the 4 partial states are merged through shared memory at the end, which also gives
the log-sum-exp max + log(sum)."""
import math

import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

NUM_WARPS = 4
THREADS = NUM_WARPS * 32
HEADS_PER_CTA = 4
ROPE_DIM = 64  # DeepSeek-V3.2 qk_rope_head_dim: the trailing key dims that are not part of the value
SCALE = (0.1 * math.log(40.0) + 1.0) ** 2 / math.sqrt(192)  # YaRN mscale^2 / sqrt(qk_nope 128 + qk_rope 64)
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _make_kernel(dim: int, topk: int):
    rank = dim - ROPE_DIM
    hb = HEADS_PER_CTA
    dpl = dim // 32  # key / query elements per lane
    rpl = rank // 32  # value (latent) elements per lane: the first rpl of the key's
    combine_iters = (hb * rank) // THREADS

    @cute.kernel
    def sparse_kernel(gQ: cute.Tensor, gKV: cute.Tensor, gIDX: cute.Tensor, gO: cute.Tensor, gLSE: cute.Tensor,
                      scale: cutlass.Float32):
        tidx, _, _ = cute.arch.thread_idx()
        hblk, b, _ = cute.arch.block_idx()
        warp = tidx // 32
        lane = tidx % 32

        smem = cutlass.memory.SmemAllocator()
        s_m = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS * hb))
        s_l = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS * hb))
        s_acc = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS * hb * rank))

        q_r = cute.make_rmem_tensor(hb * dpl, cutlass.Float32)
        acc_r = cute.make_rmem_tensor(hb * rpl, cutlass.Float32)
        m_r = cute.make_rmem_tensor(hb, cutlass.Float32)
        l_r = cute.make_rmem_tensor(hb, cutlass.Float32)
        k_r = cute.make_rmem_tensor(dpl, cutlass.Float32)
        for g in cutlass.range_constexpr(hb):
            for j in cutlass.range_constexpr(dpl):
                q_r[g * dpl + j] = gQ[b, hblk * hb + g, j * 32 + lane].to(cutlass.Float32) * scale
            for j in cutlass.range_constexpr(rpl):
                acc_r[g * rpl + j] = cutlass.Float32(0.0)
            m_r[g] = cutlass.Float32(NEG_BIG)
            l_r[g] = cutlass.Float32(0.0)

        for k in range(warp, topk, NUM_WARPS):
            row = gIDX[b, k]
            if row >= 0:  # the same for every lane of the warp, so the shuffles below stay converged
                for j in cutlass.range_constexpr(dpl):
                    k_r[j] = gKV[row, j * 32 + lane].to(cutlass.Float32)
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
                    for j in cutlass.range_constexpr(rpl):
                        acc_r[g * rpl + j] = acc_r[g * rpl + j] * corr + p * k_r[j]

        for g in cutlass.range_constexpr(hb):
            if lane == 0:
                s_m[warp * hb + g] = m_r[g]
                s_l[warp * hb + g] = l_r[g]
            for j in cutlass.range_constexpr(rpl):
                s_acc[(warp * hb + g) * rank + j * 32 + lane] = acc_r[g * rpl + j]
        cute.arch.sync_threads()

        for it in cutlass.range_constexpr(combine_iters):
            e = it * THREADS + tidx
            g = e // rank
            c = e % rank
            m_all = cutlass.Float32(NEG_BIG)
            for w in cutlass.range_constexpr(NUM_WARPS):
                m_all = cute.arch.fmax(m_all, s_m[w * hb + g])
            l_all = cutlass.Float32(0.0)
            o_all = cutlass.Float32(0.0)
            for w in cutlass.range_constexpr(NUM_WARPS):
                f = cute.math.exp(s_m[w * hb + g] - m_all)
                l_all = l_all + s_l[w * hb + g] * f
                o_all = o_all + s_acc[(w * hb + g) * rank + c] * f
            gO[b, hblk * hb + g, c] = (o_all / l_all).to(gO.element_type)
            if c == 0:
                gLSE[b, hblk * hb + g] = m_all + cute.math.log(l_all)

    @cute.jit
    def sparse_decode(mQ: cute.Tensor, mKV: cute.Tensor, mIDX: cute.Tensor, mO: cute.Tensor, mLSE: cute.Tensor,
                      scale: cutlass.Float32):
        sparse_kernel(mQ, mKV, mIDX, mO, mLSE, scale).launch(
            grid=(mQ.shape[1] // hb, mQ.shape[0], 1), block=(THREADS, 1, 1))

    return sparse_decode


def solve(q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor):
    batch, heads, dim = q.shape
    pool = kv_cache.shape[0]
    topk = indices.shape[1]
    if dim <= ROPE_DIM or kv_cache.shape[1] != dim or indices.shape[0] != batch:
        raise ValueError(f"q and kv_cache must share a last dim of latent + {ROPE_DIM} rope dims; indices the batch")
    if dim % 32 != 0 or heads % HEADS_PER_CTA != 0 or (HEADS_PER_CTA * (dim - ROPE_DIM)) % THREADS != 0:
        raise ValueError(f"dims must be multiples of 32 and heads of {HEADS_PER_CTA}")
    if q.dtype != torch.bfloat16 or kv_cache.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q and kv_cache")
    if indices.dtype != torch.int32:
        raise ValueError("expects int32 indices")
    if kv_cache.numel() >= 2**31:
        raise ValueError("kv_cache too large for 32-bit indexing")
    q = q.contiguous()
    kv_cache = kv_cache.contiguous()
    indices = indices.contiguous()
    out = torch.empty(batch, heads, dim - ROPE_DIM, dtype=q.dtype, device=q.device)
    lse = torch.empty(batch, heads, dtype=torch.float32, device=q.device)
    args = [from_dlpack(t) for t in (q, kv_cache, indices, out, lse)]
    key = (batch, heads, dim, pool, topk)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(dim, topk), *args, SCALE)
    _compiled[key](*args, SCALE)
    return out, lse
