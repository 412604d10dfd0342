"""TIRx (sm_90a) solution: one CTA of 8 warps per (chunk token, KV head), serving the KV head's whole group of query
heads. Every thread scans cu_seqlens for the token's sequence b, its chunk start and its prefix length P. Warp w
then carries one fp32 online softmax (running max, running sum, output accumulator per query head) first over the
prefix keys u = w, w + 8, ... < P, read in place through block_tables[b] (page u // page_size, slot
u % page_size), and straight on over the chunk keys start + w, start + w + 8, ... up to the token itself. Each lane
holds head_dim / 32 elements (d = j * 32 + lane) of every query head of the group and the dot products are summed
with warp shuffles. The 8 partial states are merged through shared memory at the end."""
import math

import torch
import tvm
from tvm.script import tirx as T

NUM_WARPS = 8
THREADS = NUM_WARPS * 32
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _build(total: int, q_heads: int, kv_heads: int, head_dim: int, num_pages: int, page_size: int, batch: int,
           max_pages: int):
    group = q_heads // kv_heads
    dpl = head_dim // 32
    combine_iters = (group * head_dim) // THREADS
    scale = 1.0 / math.sqrt(head_dim)
    max_prefix = max_pages * page_size

    @T.prim_func
    def chunked_prefill(q_ptr: T.handle, kn_ptr: T.handle, vn_ptr: T.handle, kc_ptr: T.handle, vc_ptr: T.handle,
                        bt_ptr: T.handle, pl_ptr: T.handle, cu_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (total, q_heads, head_dim), "bfloat16")
        KN = T.match_buffer(kn_ptr, (total, kv_heads, head_dim), "bfloat16")
        VN = T.match_buffer(vn_ptr, (total, kv_heads, head_dim), "bfloat16")
        KC = T.match_buffer(kc_ptr, (num_pages, page_size, kv_heads, head_dim), "bfloat16")
        VC = T.match_buffer(vc_ptr, (num_pages, page_size, kv_heads, head_dim), "bfloat16")
        BT = T.match_buffer(bt_ptr, (batch, max_pages), "int32")
        PL = T.match_buffer(pl_ptr, (batch,), "int32")
        CU = T.match_buffer(cu_ptr, (batch + 1,), "int32")
        O = T.match_buffer(o_ptr, (total, q_heads, head_dim), "bfloat16")
        T.device_entry()
        t, kvh = T.cta_id([total, kv_heads])
        tx = T.thread_id([THREADS])
        s_m = T.alloc_shared((NUM_WARPS * group,), "float32")
        s_l = T.alloc_shared((NUM_WARPS * group,), "float32")
        s_acc = T.alloc_shared((NUM_WARPS * group * head_dim,), "float32")
        q_r = T.alloc_local((group * dpl,), "float32")
        acc_r = T.alloc_local((group * dpl,), "float32")
        m_r = T.alloc_local((group,), "float32")
        l_r = T.alloc_local((group,), "float32")
        k_r = T.alloc_local((dpl,), "float32")
        v_r = T.alloc_local((dpl,), "float32")
        sc = T.alloc_local((4,), "float32")  # 0: score, 1: new max, 2: correction, 3: probability
        seq = T.alloc_local((3,), "int32")  # 0: sequence, 1: chunk start, 2: prefix length
        warp = tx // 32
        lane = tx % 32
        for g in T.unroll(group):
            for j in T.unroll(dpl):
                q_r[g * dpl + j] = T.Cast("float32", Q[t, kvh * group + g, j * 32 + lane]) * T.float32(scale)
                acc_r[g * dpl + j] = T.float32(0)
            m_r[g] = T.float32(NEG_BIG)
            l_r[g] = T.float32(0)
        # the chunk of token t starts at the last cu_seqlens entry <= t
        seq[0] = 0
        seq[1] = 0
        for i in T.serial(batch):
            if CU[i] <= t:
                seq[0] = i
                seq[1] = CU[i]
        seq[2] = T.min(PL[seq[0]], max_prefix)
        # prefix keys of this warp: u = warp + NUM_WARPS * i < P, through the block table
        for i in T.serial((seq[2] - warp + (NUM_WARPS - 1)) // NUM_WARPS):
            u = warp + NUM_WARPS * i
            page = BT[seq[0], u // page_size]
            slot = u % page_size
            for j in T.unroll(dpl):
                k_r[j] = T.Cast("float32", KC[page, slot, kvh, j * 32 + lane])
                v_r[j] = T.Cast("float32", VC[page, slot, kvh, j * 32 + lane])
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
        # chunk keys of this warp: start + warp + NUM_WARPS * i <= t
        for i in T.serial((t + 1 - seq[1] - warp + (NUM_WARPS - 1)) // NUM_WARPS):
            s = seq[1] + warp + NUM_WARPS * i
            for j in T.unroll(dpl):
                k_r[j] = T.Cast("float32", KN[s, kvh, j * 32 + lane])
                v_r[j] = T.Cast("float32", VN[s, kvh, j * 32 + lane])
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
            O[t, kvh * group + g2, d] = T.Cast("bfloat16", osum[0] / lsum[0])

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": chunked_prefill}), target=target, tir_pipeline="tirx")


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
    key = (total, q_heads, kv_heads, head_dim, num_pages, page_size, batch, max_pages)
    if key not in _compiled:
        _compiled[key] = _build(*key)["main"]
    args = [t.contiguous() for t in (q, k_new, v_new, k_cache, v_cache, block_tables, prefix_lens, cu_seqlens)]
    out = torch.empty_like(args[0])
    _compiled[key](*args, out)
    return out
