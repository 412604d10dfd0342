"""TIRx (sm_90a) solution: one CTA of 8 warps per (draft token i, KV head, sequence), serving the KV head's whole
group of query heads. Thread 0 walks the parent pointers from i to the root and writes i's ancestors-or-self to a
shared-memory list. Warp w then carries one fp32 online softmax (running max, running sum, output accumulator per
query head) over the cache rows w, w + 8, ... < context length, and straight on over list entries w, w + 8, ...
(the draft keys they name). Each lane holds head_dim / 32 elements (d = j * 32 + lane) of every query head of the
group and the dot products are summed with warp shuffles. The 8 partial states are merged through shared memory
at the end."""
import math

import torch
import tvm
from tvm.script import tirx as T

NUM_WARPS = 8
THREADS = NUM_WARPS * 32
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _build(batch: int, tree: int, q_heads: int, kv_heads: int, head_dim: int, max_ctx: int):
    group = q_heads // kv_heads
    dpl = head_dim // 32
    combine_iters = (group * head_dim) // THREADS
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def tree_verify(q_ptr: T.handle, kc_ptr: T.handle, vc_ptr: T.handle, cl_ptr: T.handle, kt_ptr: T.handle,
                    vt_ptr: T.handle, par_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, tree, q_heads, head_dim), "bfloat16")
        KC = T.match_buffer(kc_ptr, (batch, max_ctx, kv_heads, head_dim), "bfloat16")
        VC = T.match_buffer(vc_ptr, (batch, max_ctx, kv_heads, head_dim), "bfloat16")
        CL = T.match_buffer(cl_ptr, (batch,), "int32")
        KT = T.match_buffer(kt_ptr, (batch, tree, kv_heads, head_dim), "bfloat16")
        VT = T.match_buffer(vt_ptr, (batch, tree, kv_heads, head_dim), "bfloat16")
        PAR = T.match_buffer(par_ptr, (batch, tree), "int32")
        O = T.match_buffer(o_ptr, (batch, tree, q_heads, head_dim), "bfloat16")
        T.device_entry()
        i, kvh, b = T.cta_id([tree, kv_heads, batch])
        tx = T.thread_id([THREADS])
        s_m = T.alloc_shared((NUM_WARPS * group,), "float32")
        s_l = T.alloc_shared((NUM_WARPS * group,), "float32")
        s_acc = T.alloc_shared((NUM_WARPS * group * head_dim,), "float32")
        s_anc = T.alloc_shared((tree,), "int32")
        s_cnt = T.alloc_shared((1,), "int32")
        q_r = T.alloc_local((group * dpl,), "float32")
        acc_r = T.alloc_local((group * dpl,), "float32")
        m_r = T.alloc_local((group,), "float32")
        l_r = T.alloc_local((group,), "float32")
        k_r = T.alloc_local((dpl,), "float32")
        v_r = T.alloc_local((dpl,), "float32")
        sc = T.alloc_local((4,), "float32")  # 0: score, 1: new max, 2: correction, 3: probability
        walk = T.alloc_local((2,), "int32")  # 0: current node, 1: list length
        warp = tx // 32
        lane = tx % 32
        if tx == 0:
            # from i to the root (at most tree steps; an out-of-range pointer ends the walk)
            walk[0] = i
            walk[1] = 0
            for step in T.serial(tree):  # noqa: B007 - a bounded walk: the count is unused
                if walk[0] >= 0 and walk[0] < tree:
                    s_anc[walk[1]] = walk[0]
                    walk[1] = walk[1] + 1
                    walk[0] = PAR[b, walk[0]]
                else:
                    walk[0] = -1
            s_cnt[0] = walk[1]
        for g in T.unroll(group):
            for j in T.unroll(dpl):
                q_r[g * dpl + j] = T.Cast("float32", Q[b, i, kvh * group + g, j * 32 + lane]) * T.float32(scale)
                acc_r[g * dpl + j] = T.float32(0)
            m_r[g] = T.float32(NEG_BIG)
            l_r[g] = T.float32(0)
        T.cuda.cta_sync()
        ctx = T.min(CL[b], max_ctx)
        # cache rows of this warp: u = warp + NUM_WARPS * n < ctx
        for n in T.serial((ctx - warp + (NUM_WARPS - 1)) // NUM_WARPS):
            u = warp + NUM_WARPS * n
            for j in T.unroll(dpl):
                k_r[j] = T.Cast("float32", KC[b, u, kvh, j * 32 + lane])
                v_r[j] = T.Cast("float32", VC[b, u, kvh, j * 32 + lane])
            for g in T.unroll(group):
                sc[0] = T.float32(0)
                for j in T.unroll(dpl):
                    sc[0] = sc[0] + q_r[g * dpl + j] * k_r[j]
                sc[0] = T.cuda.warp_sum(sc[0])
                sc[1] = T.max(m_r[g], sc[0])
                sc[2] = T.exp(m_r[g] - sc[1])
                sc[3] = T.exp(sc[0] - sc[1])
                l_r[g] = l_r[g] * sc[2] + sc[3]
                m_r[g] = sc[1]
                for j in T.unroll(dpl):
                    acc_r[g * dpl + j] = acc_r[g * dpl + j] * sc[2] + sc[3] * v_r[j]
        # ancestors-or-self of this warp: list entries warp + NUM_WARPS * n < count
        for n in T.serial((s_cnt[0] - warp + (NUM_WARPS - 1)) // NUM_WARPS):
            a = s_anc[warp + NUM_WARPS * n]
            for j in T.unroll(dpl):
                k_r[j] = T.Cast("float32", KT[b, a, kvh, j * 32 + lane])
                v_r[j] = T.Cast("float32", VT[b, a, kvh, j * 32 + lane])
            for g in T.unroll(group):
                sc[0] = T.float32(0)
                for j in T.unroll(dpl):
                    sc[0] = sc[0] + q_r[g * dpl + j] * k_r[j]
                sc[0] = T.cuda.warp_sum(sc[0])
                sc[1] = T.max(m_r[g], sc[0])
                sc[2] = T.exp(m_r[g] - sc[1])
                sc[3] = T.exp(sc[0] - sc[1])
                l_r[g] = l_r[g] * sc[2] + sc[3]
                m_r[g] = sc[1]
                for j in T.unroll(dpl):
                    acc_r[g * dpl + j] = acc_r[g * dpl + j] * sc[2] + sc[3] * v_r[j]
        for g in T.unroll(group):
            if lane == 0:
                s_m[warp * group + g] = m_r[g]
                s_l[warp * group + g] = l_r[g]
            for j in T.unroll(dpl):
                s_acc[(warp * group + g) * head_dim + j * 32 + lane] = acc_r[g * dpl + j]
        T.cuda.cta_sync()
        mx = T.alloc_local((1,), "float32")
        lsum = T.alloc_local((1,), "float32")
        osum = T.alloc_local((1,), "float32")
        f = T.alloc_local((1,), "float32")
        for it in T.unroll(combine_iters):
            e = it * THREADS + tx
            g2 = e // head_dim
            d = e % head_dim
            mx[0] = T.float32(NEG_BIG)
            for w in T.unroll(NUM_WARPS):
                mx[0] = T.max(mx[0], s_m[w * group + g2])
            lsum[0] = T.float32(0)
            osum[0] = T.float32(0)
            for w in T.unroll(NUM_WARPS):
                f[0] = T.exp(s_m[w * group + g2] - mx[0])
                lsum[0] = lsum[0] + s_l[w * group + g2] * f[0]
                osum[0] = osum[0] + s_acc[(w * group + g2) * head_dim + d] * f[0]
            O[b, i, kvh * group + g2, d] = T.Cast("bfloat16", osum[0] / lsum[0])

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": tree_verify}), target=target, tir_pipeline="tirx")


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
    key = (batch, tree, q_heads, kv_heads, head_dim, max_ctx)
    if key not in _compiled:
        _compiled[key] = _build(*key)["main"]
    args = [t.contiguous() for t in (q, k_cache, v_cache, context_lens, k_tree, v_tree, parents)]
    out = torch.empty_like(args[0])
    _compiled[key](*args, out)
    return out
