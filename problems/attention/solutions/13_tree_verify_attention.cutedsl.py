"""CuTe DSL (sm_90a) solution: one CTA of 8 warps per (draft token i, KV head, sequence), serving the KV head's whole
group of query heads. Thread 0 walks the parent pointers from i to the root and writes i's ancestors-or-self to a
shared-memory list. Warp w then carries one fp32 online softmax (running max, running sum, output accumulator per
query head) over the cache rows w, w + 8, ... < context length, and straight on over list entries w, w + 8, ...
(the draft keys they name). Each lane holds head_dim / 32 elements (d = j * 32 + lane) of every query head of the
group and the dot products are summed with warp shuffles. The 8 partial states are merged through shared memory
at the end."""
import math

import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

NUM_WARPS = 8
THREADS = NUM_WARPS * 32
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _make_kernel(tree: int, group: int, head_dim: int, max_ctx: int):
    dpl = head_dim // 32  # elements of a head vector per lane
    combine_iters = (group * head_dim) // THREADS

    @cute.kernel
    def tree_kernel(gQ: cute.Tensor, gKC: cute.Tensor, gVC: cute.Tensor, gCL: cute.Tensor, gKT: cute.Tensor,
                    gVT: cute.Tensor, gPAR: cute.Tensor, gO: cute.Tensor, scale: cutlass.Float32):
        tidx, _, _ = cute.arch.thread_idx()
        i, kvh, b = cute.arch.block_idx()
        warp = tidx // 32
        lane = tidx % 32

        smem = cutlass.memory.SmemAllocator()
        s_m = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS * group))
        s_l = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS * group))
        s_acc = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS * group * head_dim))
        s_anc = smem.allocate_tensor(cutlass.Int32, cute.make_layout(tree))
        s_cnt = smem.allocate_tensor(cutlass.Int32, cute.make_layout(1))

        if tidx == 0:
            # from i to the root (at most tree steps; an out-of-range pointer ends the walk)
            node = cutlass.Int32(i)
            cnt = cutlass.Int32(0)
            for _step in range(tree):
                if node >= 0:
                    if node < tree:
                        s_anc[cnt] = node
                        cnt = cnt + 1
                        node = gPAR[b, node]
                    else:
                        node = cutlass.Int32(-1)
            s_cnt[0] = cnt

        q_r = cute.make_rmem_tensor(group * dpl, cutlass.Float32)
        acc_r = cute.make_rmem_tensor(group * dpl, cutlass.Float32)
        m_r = cute.make_rmem_tensor(group, cutlass.Float32)
        l_r = cute.make_rmem_tensor(group, cutlass.Float32)
        k_r = cute.make_rmem_tensor(dpl, cutlass.Float32)
        v_r = cute.make_rmem_tensor(dpl, cutlass.Float32)
        for g in cutlass.range_constexpr(group):
            for j in cutlass.range_constexpr(dpl):
                q_r[g * dpl + j] = gQ[b, i, kvh * group + g, j * 32 + lane].to(cutlass.Float32) * scale
                acc_r[g * dpl + j] = cutlass.Float32(0.0)
            m_r[g] = cutlass.Float32(NEG_BIG)
            l_r[g] = cutlass.Float32(0.0)
        cute.arch.sync_threads()

        ctx = gCL[b]
        if ctx > max_ctx:
            ctx = cutlass.Int32(max_ctx)
        # the cache rows of this warp
        for u in range(warp, ctx, NUM_WARPS):
            for j in cutlass.range_constexpr(dpl):
                k_r[j] = gKC[b, u, kvh, j * 32 + lane].to(cutlass.Float32)
                v_r[j] = gVC[b, u, kvh, j * 32 + lane].to(cutlass.Float32)
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

        # then this warp's entries of the ancestor list, into the same softmax state
        for n in range(warp, s_cnt[0], NUM_WARPS):
            a = s_anc[n]
            for j in cutlass.range_constexpr(dpl):
                k_r[j] = gKT[b, a, kvh, j * 32 + lane].to(cutlass.Float32)
                v_r[j] = gVT[b, a, kvh, j * 32 + lane].to(cutlass.Float32)
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
            gO[b, i, kvh * group + g, d] = (o_all / l_all).to(gO.element_type)

    @cute.jit
    def tree_verify(mQ: cute.Tensor, mKC: cute.Tensor, mVC: cute.Tensor, mCL: cute.Tensor, mKT: cute.Tensor,
                    mVT: cute.Tensor, mPAR: cute.Tensor, mO: cute.Tensor, scale: cutlass.Float32):
        tree_kernel(mQ, mKC, mVC, mCL, mKT, mVT, mPAR, mO, scale).launch(
            grid=(mQ.shape[1], mKC.shape[2], mQ.shape[0]), block=(THREADS, 1, 1))

    return tree_verify


def solve(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, context_lens: torch.Tensor,
          k_tree: torch.Tensor, v_tree: torch.Tensor, parents: torch.Tensor):
    batch, tree, q_heads, head_dim = q.shape
    max_ctx, kv_heads = k_cache.shape[1], k_cache.shape[2]
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    group = q_heads // kv_heads
    if head_dim % 32 != 0 or (group * head_dim) % THREADS != 0:
        raise ValueError(f"head_dim must be a multiple of 32 and group * head_dim of {THREADS}")
    if tuple(k_cache.shape) != (batch, max_ctx, kv_heads, head_dim) or v_cache.shape != k_cache.shape:
        raise ValueError("k_cache and v_cache must be (batch, max_context, kv_heads, head_dim)")
    if tuple(k_tree.shape) != (batch, tree, kv_heads, head_dim) or v_tree.shape != k_tree.shape:
        raise ValueError("k_tree and v_tree must be (batch, tree, kv_heads, head_dim)")
    if tuple(context_lens.shape) != (batch,) or tuple(parents.shape) != (batch, tree):
        raise ValueError("context_lens must be (batch,) and parents (batch, tree)")
    if any(t.dtype != torch.bfloat16 for t in (q, k_cache, v_cache, k_tree, v_tree)):
        raise ValueError("expects bfloat16 q, caches and draft keys / values")
    if context_lens.dtype != torch.int32 or parents.dtype != torch.int32:
        raise ValueError("expects int32 context lengths and parents")
    if k_cache.numel() >= 2**31 or batch > 65535 or kv_heads > 65535:
        raise ValueError("cache too large for 32-bit indexing, or too many sequences / KV heads for the grid")
    tensors = [t.contiguous() for t in (q, k_cache, v_cache, context_lens, k_tree, v_tree, parents)]
    out = torch.empty_like(tensors[0])
    scale = 1.0 / math.sqrt(head_dim)
    args = [from_dlpack(t) for t in tensors] + [from_dlpack(out)]
    key = (batch, tree, q_heads, kv_heads, head_dim, max_ctx)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(tree, group, head_dim, max_ctx), *args, scale)
    _compiled[key](*args, scale)
    return out
