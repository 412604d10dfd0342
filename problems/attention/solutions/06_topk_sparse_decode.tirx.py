"""TIRx (sm_90a) solution: one CTA of 4 warps per (sequence, block of 4 heads); the block's heads share every
gathered row, since all heads attend to the same selected tokens. Warp w walks the index slots k = w, w + 4, ...,
skips unused (-1) slots and gathers pool row indices[b, k]; each lane holds 576 / 32 = 18 query elements
(c = j * 32 + lane) of every head of the block and reuses its first 16 key elements as the value (the latent part).
Dot products are summed with warp shuffles and every warp keeps an fp32 online softmax (running max, running sum,
512-dim accumulator) per head; the 4 partial states are merged through shared memory at the end, which also gives
the log-sum-exp max + log(sum)."""
import math

import torch
import tvm
from tvm.script import tirx as T

NUM_WARPS = 4
THREADS = NUM_WARPS * 32
HEADS_PER_CTA = 4
ROPE_DIM = 64  # DeepSeek-V3.2 qk_rope_head_dim: the trailing key dims that are not part of the value
SCALE = (0.1 * math.log(40.0) + 1.0) ** 2 / math.sqrt(192)  # YaRN mscale^2 / sqrt(qk_nope 128 + qk_rope 64)
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _build(batch: int, heads: int, dim: int, pool: int, topk: int):
    rank = dim - ROPE_DIM
    hb = HEADS_PER_CTA
    dpl = dim // 32  # key / query elements per lane
    rpl = rank // 32  # value (latent) elements per lane: the first rpl of the key's
    combine_iters = (hb * rank) // THREADS

    @T.prim_func
    def topk_sparse_decode(q_ptr: T.handle, kv_ptr: T.handle, idx_ptr: T.handle, o_ptr: T.handle,
                           lse_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, heads, dim), "bfloat16")
        KV = T.match_buffer(kv_ptr, (pool, dim), "bfloat16")
        IDX = T.match_buffer(idx_ptr, (batch, topk), "int32")
        O = T.match_buffer(o_ptr, (batch, heads, rank), "bfloat16")
        LSE = T.match_buffer(lse_ptr, (batch, heads), "float32")
        T.device_entry()
        hblk, b = T.cta_id([heads // hb, batch])
        tx = T.thread_id([THREADS])
        s_m = T.alloc_shared((NUM_WARPS * hb,), "float32")
        s_l = T.alloc_shared((NUM_WARPS * hb,), "float32")
        s_acc = T.alloc_shared((NUM_WARPS * hb * rank,), "float32")
        q_r = T.alloc_local((hb * dpl,), "float32")
        acc_r = T.alloc_local((hb * rpl,), "float32")
        m_r = T.alloc_local((hb,), "float32")
        l_r = T.alloc_local((hb,), "float32")
        k_r = T.alloc_local((dpl,), "float32")
        sc = T.alloc_local((4,), "float32")  # 0: score, 1: new max, 2: correction, 3: probability
        row = T.alloc_local((1,), "int32")
        warp = tx // 32
        lane = tx % 32
        for g in T.unroll(hb):
            for j in T.unroll(dpl):
                q_r[g * dpl + j] = T.Cast("float32", Q[b, hblk * hb + g, j * 32 + lane]) * T.float32(SCALE)
            for j in T.unroll(rpl):
                acc_r[g * rpl + j] = T.float32(0)
            m_r[g] = T.float32(NEG_BIG)
            l_r[g] = T.float32(0)
        # index slots of this warp: k = warp + NUM_WARPS * i
        for i in T.serial((topk - warp + (NUM_WARPS - 1)) // NUM_WARPS):
            row[0] = IDX[b, warp + NUM_WARPS * i]
            if row[0] >= 0:  # the same for every lane of the warp, so the shuffles below stay converged
                for j in T.unroll(dpl):
                    k_r[j] = T.Cast("float32", KV[row[0], j * 32 + lane])
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
                    for j in T.unroll(rpl):
                        acc_r[g * rpl + j] = acc_r[g * rpl + j] * sc[2] + sc[3] * k_r[j]
        for g in T.unroll(hb):
            if lane == 0:
                s_m[warp * hb + g] = m_r[g]
                s_l[warp * hb + g] = l_r[g]
            for j in T.unroll(rpl):
                s_acc[(warp * hb + g) * rank + j * 32 + lane] = acc_r[g * rpl + j]
        T.cuda.cta_sync()
        mx = T.alloc_local((1,), "float32")
        lsum = T.alloc_local((1,), "float32")
        osum = T.alloc_local((1,), "float32")
        f = T.alloc_local((1,), "float32")
        for it in T.unroll(combine_iters):
            e = it * THREADS + tx
            g2 = e // rank
            c = e % rank
            mx[0] = T.float32(NEG_BIG)
            for w in T.unroll(NUM_WARPS):
                mx[0] = T.max(mx[0], s_m[w * hb + g2])
            lsum[0] = T.float32(0)
            osum[0] = T.float32(0)
            for w in T.unroll(NUM_WARPS):
                f[0] = T.exp(s_m[w * hb + g2] - mx[0])
                lsum[0] = lsum[0] + s_l[w * hb + g2] * f[0]
                osum[0] = osum[0] + s_acc[(w * hb + g2) * rank + c] * f[0]
            O[b, hblk * hb + g2, c] = T.Cast("bfloat16", osum[0] / lsum[0])
            if c == 0:
                LSE[b, hblk * hb + g2] = mx[0] + T.log(lsum[0])

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": topk_sparse_decode}), target=target, tir_pipeline="tirx")


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
    key = (batch, heads, dim, pool, topk)
    if key not in _compiled:
        _compiled[key] = _build(*key)["main"]
    q = q.contiguous()
    kv_cache = kv_cache.contiguous()
    indices = indices.contiguous()
    out = torch.empty(batch, heads, dim - ROPE_DIM, dtype=q.dtype, device=q.device)
    lse = torch.empty(batch, heads, dtype=torch.float32, device=q.device)
    _compiled[key](q, kv_cache, indices, out, lse)
    return out, lse
