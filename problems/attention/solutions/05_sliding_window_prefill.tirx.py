"""TIRx (sm_90a) solution: one CTA of 8 warps per (query position i, KV head, sequence), serving the KV head's whole
group of query heads. Warp w walks the band's keys lo + w, lo + w + 8, ... up to i, with lo = max(0, i - window + 1).
Each lane holds head_dim / 32 elements (d = j * 32 + lane) of every query head of the group, the dot products are
summed with warp shuffles, and every warp keeps an fp32 online softmax (running max, running sum, output
accumulator) per query head. The 8 partial states are merged through shared memory at the end."""
import math

import torch
import tvm
from tvm.script import tirx as T

NUM_WARPS = 8
THREADS = NUM_WARPS * 32
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _build(batch: int, q_heads: int, kv_heads: int, seq: int, head_dim: int, window: int):
    group = q_heads // kv_heads
    dpl = head_dim // 32
    combine_iters = (group * head_dim) // THREADS
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def sliding_window_prefill(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, q_heads, seq, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, kv_heads, seq, head_dim), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, kv_heads, seq, head_dim), "bfloat16")
        O = T.match_buffer(o_ptr, (batch, q_heads, seq, head_dim), "bfloat16")
        T.device_entry()
        i, kvh, b = T.cta_id([seq, kv_heads, batch])
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
        warp = tx // 32
        lane = tx % 32
        for g in T.unroll(group):
            for j in T.unroll(dpl):
                q_r[g * dpl + j] = T.Cast("float32", Q[b, kvh * group + g, i, j * 32 + lane]) * T.float32(scale)
                acc_r[g * dpl + j] = T.float32(0)
            m_r[g] = T.float32(NEG_BIG)
            l_r[g] = T.float32(0)
        lo = T.max(i - (window - 1), 0)  # first key of the band
        n = i + 1 - lo  # keys in the band, at least 1
        # keys of this warp: lo + warp + NUM_WARPS * c for c < ceil((n - warp) / NUM_WARPS)
        for c in T.serial((n - warp + (NUM_WARPS - 1)) // NUM_WARPS):
            s = lo + warp + NUM_WARPS * c
            for j in T.unroll(dpl):
                k_r[j] = T.Cast("float32", K[b, kvh, s, j * 32 + lane])
                v_r[j] = T.Cast("float32", V[b, kvh, s, j * 32 + lane])
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
            O[b, kvh * group + g2, i, d] = T.Cast("bfloat16", osum[0] / lsum[0])

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": sliding_window_prefill}), target=target, tir_pipeline="tirx")


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
    key = (batch, q_heads, kv_heads, seq, head_dim, window)
    if key not in _compiled:
        _compiled[key] = _build(*key)["main"]
    q = q.contiguous()
    k = k.contiguous()
    v = v.contiguous()
    out = torch.empty_like(q)
    _compiled[key](q, k, v, out)
    return out
