"""TIRx (sm_90a) solution: one CTA of 4 warps per (new token, KV head), serving the KV head's whole group of query
heads. Every thread scans cu_seqlens_q for the token's sequence, which gives its absolute position p and the
absolute position of the sequence's first packed key; the visible keys are the contiguous packed range from
max(chunk start floor(p / C) * C, first key) to p itself. Warp w walks that range at stride 4; each lane holds
head_dim / 32 elements (d = j * 32 + lane) of every query head of the group, the dot products are summed with warp
shuffles, and every warp keeps an fp32 online softmax (running max, running sum, output accumulator) per query
head. The 4 partial states are merged through shared memory at the end."""
import math

import torch
import tvm
from tvm.script import tirx as T

NUM_WARPS = 4
THREADS = NUM_WARPS * 32
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _build(q_tokens: int, k_tokens: int, q_heads: int, kv_heads: int, head_dim: int, batch: int, chunk: int):
    group = q_heads // kv_heads
    dpl = head_dim // 32
    combine_iters = (group * head_dim) // THREADS
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def chunked_local_prefill(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, cuq_ptr: T.handle,
                              cuk_ptr: T.handle, sp_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (q_tokens, q_heads, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (k_tokens, kv_heads, head_dim), "bfloat16")
        V = T.match_buffer(v_ptr, (k_tokens, kv_heads, head_dim), "bfloat16")
        CUQ = T.match_buffer(cuq_ptr, (batch + 1,), "int32")
        CUK = T.match_buffer(cuk_ptr, (batch + 1,), "int32")
        SP = T.match_buffer(sp_ptr, (batch,), "int32")
        O = T.match_buffer(o_ptr, (q_tokens, q_heads, head_dim), "bfloat16")
        T.device_entry()
        t, kvh = T.cta_id([q_tokens, kv_heads])
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
        seq = T.alloc_local((1,), "int32")
        rng = T.alloc_local((2,), "int32")  # 0: first visible packed key, 1: number of visible keys
        warp = tx // 32
        lane = tx % 32
        for g in T.unroll(group):
            for j in T.unroll(dpl):
                q_r[g * dpl + j] = T.Cast("float32", Q[t, kvh * group + g, j * 32 + lane]) * T.float32(scale)
                acc_r[g * dpl + j] = T.float32(0)
            m_r[g] = T.float32(NEG_BIG)
            l_r[g] = T.float32(0)
        # the token's sequence: the last cu_seqlens_q entry <= t
        seq[0] = 0
        for i in T.serial(batch):
            if CUQ[i] <= t:
                seq[0] = i
        s = seq[0]
        p = SP[s] + (t - CUQ[s])  # absolute position of the query
        k_abs0 = SP[s] + (CUQ[s + 1] - CUQ[s]) - (CUK[s + 1] - CUK[s])  # absolute position of the first key
        lo = T.max((p // chunk) * chunk, k_abs0)
        rng[0] = CUK[s] + (lo - k_abs0)
        rng[1] = p - lo + 1
        # keys of this warp: rng[0] + warp + NUM_WARPS * i for i < ceil((n - warp) / NUM_WARPS)
        for i in T.serial((rng[1] - warp + (NUM_WARPS - 1)) // NUM_WARPS):
            kt = rng[0] + warp + NUM_WARPS * i
            for j in T.unroll(dpl):
                k_r[j] = T.Cast("float32", K[kt, kvh, j * 32 + lane])
                v_r[j] = T.Cast("float32", V[kt, kvh, j * 32 + lane])
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
    return tvm.compile(tvm.IRModule({"main": chunked_local_prefill}), target=target, tir_pipeline="tirx")


def solve(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
          cu_seqlens_k: torch.Tensor, start_pos: torch.Tensor, chunk_size: int):
    q_tokens, q_heads, head_dim = q.shape
    k_tokens, kv_heads, _ = k.shape
    batch = start_pos.shape[0]
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    group = q_heads // kv_heads
    if head_dim % 32 != 0 or (group * head_dim) % THREADS != 0:
        raise ValueError(f"head_dim must be a multiple of 32 and group * head_dim of {THREADS}")
    if k.shape != (k_tokens, kv_heads, head_dim) or v.shape != k.shape:
        raise ValueError("k and v must be (k_tokens, kv_heads, head_dim) with q's head_dim")
    if cu_seqlens_q.shape != (batch + 1,) or cu_seqlens_k.shape != (batch + 1,):
        raise ValueError("cu_seqlens_q and cu_seqlens_k must have batch + 1 entries")
    if q.dtype != torch.bfloat16 or k.dtype != torch.bfloat16 or v.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q, k and v")
    for x in (cu_seqlens_q, cu_seqlens_k, start_pos):
        if x.dtype != torch.int32:
            raise ValueError("expects int32 cu_seqlens and start positions")
    if q.numel() >= 2**31 or k.numel() >= 2**31:
        raise ValueError("q or k too large for 32-bit indexing")
    chunk = int(chunk_size)
    if chunk <= 0:
        raise ValueError("chunk_size must be positive")
    key = (q_tokens, k_tokens, q_heads, kv_heads, head_dim, batch, chunk)
    if key not in _compiled:
        _compiled[key] = _build(*key)["main"]
    q = q.contiguous()
    k = k.contiguous()
    v = v.contiguous()
    out = torch.empty_like(q)
    _compiled[key](q, k, v, cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous(), start_pos.contiguous(), out)
    return out
