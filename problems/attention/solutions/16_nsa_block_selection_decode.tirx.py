"""TIRx (sm_90a) solution: one CTA of 8 warps per (sequence, block of 4 query heads of one KV group); the block's
heads share every gathered key, since the whole group attends to its KV head's selected blocks. The CTA walks the
selection slots in order and skips unused (-1) slots; inside a selected 64-token block, warp w takes the tokens
block * 64 + w, + 8, ... that lie before the sequence's length, read from the head-major cache. Each lane holds
head_dim / 32 elements (d = j * 32 + lane) of every head of the block, the dot products are summed with warp
shuffles, and every warp keeps an fp32 online softmax (running max, running sum, output accumulator) per head;
the 8 partial states are merged through shared memory at the end."""
import math

import torch
import tvm
from tvm.script import tirx as T

BLOCK_SIZE = 64  # NSA selection block size
NUM_WARPS = 8
THREADS = NUM_WARPS * 32
HEADS_PER_CTA = 4
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _build(batch: int, q_heads: int, head_dim: int, kv_heads: int, max_tokens: int, top_n: int):
    group = q_heads // kv_heads
    hb = HEADS_PER_CTA
    dpl = head_dim // 32
    combine_iters = (hb * head_dim) // THREADS
    per_warp = BLOCK_SIZE // NUM_WARPS  # tokens of a block per warp
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def nsa_selection_decode(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, bi_ptr: T.handle,
                             cl_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, q_heads, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, kv_heads, max_tokens, head_dim), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, kv_heads, max_tokens, head_dim), "bfloat16")
        BI = T.match_buffer(bi_ptr, (batch, kv_heads, top_n), "int32")
        CL = T.match_buffer(cl_ptr, (batch,), "int32")
        O = T.match_buffer(o_ptr, (batch, q_heads, head_dim), "bfloat16")
        T.device_entry()
        hblk, b = T.cta_id([q_heads // hb, batch])
        tx = T.thread_id([THREADS])
        s_m = T.alloc_shared((NUM_WARPS * hb,), "float32")
        s_l = T.alloc_shared((NUM_WARPS * hb,), "float32")
        s_acc = T.alloc_shared((NUM_WARPS * hb * head_dim,), "float32")
        q_r = T.alloc_local((hb * dpl,), "float32")
        acc_r = T.alloc_local((hb * dpl,), "float32")
        m_r = T.alloc_local((hb,), "float32")
        l_r = T.alloc_local((hb,), "float32")
        k_r = T.alloc_local((dpl,), "float32")
        v_r = T.alloc_local((dpl,), "float32")
        sc = T.alloc_local((4,), "float32")  # 0: score, 1: new max, 2: correction, 3: probability
        blk = T.alloc_local((1,), "int32")
        warp = tx // 32
        lane = tx % 32
        kvh = (hblk * hb) // group
        for g in T.unroll(hb):
            for j in T.unroll(dpl):
                q_r[g * dpl + j] = T.Cast("float32", Q[b, hblk * hb + g, j * 32 + lane]) * T.float32(scale)
                acc_r[g * dpl + j] = T.float32(0)
            m_r[g] = T.float32(NEG_BIG)
            l_r[g] = T.float32(0)
        ctx = T.min(CL[b], max_tokens)
        for i in T.serial(top_n):
            blk[0] = BI[b, kvh, i]
            if blk[0] >= 0:  # the same for the whole CTA
                for r in T.serial(per_warp):
                    t = blk[0] * BLOCK_SIZE + warp + NUM_WARPS * r
                    if t < ctx:  # the same for every lane of the warp, so the shuffles below stay converged
                        for j in T.unroll(dpl):
                            k_r[j] = T.Cast("float32", K[b, kvh, t, j * 32 + lane])
                            v_r[j] = T.Cast("float32", V[b, kvh, t, j * 32 + lane])
                        for g in T.unroll(hb):
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
        for g in T.unroll(hb):
            if lane == 0:
                s_m[warp * hb + g] = m_r[g]
                s_l[warp * hb + g] = l_r[g]
            for j in T.unroll(dpl):
                s_acc[(warp * hb + g) * head_dim + j * 32 + lane] = acc_r[g * dpl + j]
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
                mx[0] = T.max(mx[0], s_m[w * hb + g2])
            lsum[0] = T.float32(0)
            osum[0] = T.float32(0)
            for w in T.unroll(NUM_WARPS):
                f[0] = T.exp(s_m[w * hb + g2] - mx[0])
                lsum[0] = lsum[0] + s_l[w * hb + g2] * f[0]
                osum[0] = osum[0] + s_acc[(w * hb + g2) * head_dim + d] * f[0]
            O[b, hblk * hb + g2, d] = T.Cast("bfloat16", osum[0] / lsum[0])

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": nsa_selection_decode}), target=target, tir_pipeline="tirx")


def solve(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_indices: torch.Tensor,
          context_lens: torch.Tensor):
    batch, q_heads, head_dim = q.shape
    _, kv_heads, max_tokens, _ = k_cache.shape
    top_n = block_indices.shape[2]
    if q_heads % kv_heads != 0 or (q_heads // kv_heads) % HEADS_PER_CTA != 0:
        raise ValueError(f"query heads must be a multiple of KV heads, the group a multiple of {HEADS_PER_CTA}")
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
    key = (batch, q_heads, head_dim, kv_heads, max_tokens, top_n)
    if key not in _compiled:
        _compiled[key] = _build(*key)["main"]
    q = q.contiguous()
    k_cache = k_cache.contiguous()
    v_cache = v_cache.contiguous()
    block_indices = block_indices.contiguous()
    context_lens = context_lens.contiguous()
    out = torch.empty_like(q)
    _compiled[key](q, k_cache, v_cache, block_indices, context_lens, out)
    return out
