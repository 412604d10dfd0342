"""TIRx (sm_90a) solution: one CTA of 4 warps per (sequence, KV head), serving the KV head's whole group of query
heads. Each lane holds head_dim / 32 elements (d = j * 32 + lane) of a head vector, so both halves of every rotary
pair (d, d + head_dim / 2) sit in the same lane: the CTA rotates the group's queries (rounded to bf16 like the real
op's rotated query) and the new key (bf16) in registers with cos/sin at position cache_lens[b], and warp 0 appends
the rotated key and the value to the caches. Warp w walks the earlier cached keys t = w, w + 4, ... < cache_lens[b],
warp 0 also scores the new key from its registers; dot products are summed with warp shuffles and every warp keeps
an fp32 online softmax (running max, running sum, output accumulator) per query head. The 4 partial states are
merged through shared memory at the end."""
import math

import torch
import tvm
from tvm.script import tirx as T

NUM_WARPS = 4
THREADS = NUM_WARPS * 32
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _build(batch: int, q_heads: int, kv_heads: int, head_dim: int, max_tokens: int, max_pos: int):
    group = q_heads // kv_heads
    dpl = head_dim // 32
    hp = dpl // 2  # register pairs (j, j + hp) are rotary pairs (d, d + head_dim / 2)
    half = head_dim // 2
    combine_iters = (group * head_dim) // THREADS
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def rope_decode(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, kc_ptr: T.handle, vc_ptr: T.handle,
                    cl_ptr: T.handle, cs_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, q_heads, head_dim), "bfloat16")
        KN = T.match_buffer(k_ptr, (batch, kv_heads, head_dim), "bfloat16")
        VN = T.match_buffer(v_ptr, (batch, kv_heads, head_dim), "bfloat16")
        KC = T.match_buffer(kc_ptr, (batch, max_tokens, kv_heads, head_dim), "bfloat16")
        VC = T.match_buffer(vc_ptr, (batch, max_tokens, kv_heads, head_dim), "bfloat16")
        CL = T.match_buffer(cl_ptr, (batch,), "int32")
        CS = T.match_buffer(cs_ptr, (max_pos, head_dim), "float32")
        O = T.match_buffer(o_ptr, (batch, q_heads, head_dim), "bfloat16")
        T.device_entry()
        kvh, b = T.cta_id([kv_heads, batch])
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
        cs_r = T.alloc_local((2 * hp,), "float32")  # cos of pair j at j, sin at hp + j
        sc = T.alloc_local((4,), "float32")  # 0: score, 1: new max, 2: correction, 3: probability
        kb = T.alloc_local((dpl,), "bfloat16")  # the rotated new key, as stored
        warp = tx // 32
        lane = tx % 32
        p = CL[b]
        for j in T.unroll(hp):
            cs_r[j] = CS[p, j * 32 + lane]
            cs_r[hp + j] = CS[p, half + j * 32 + lane]
        for g in T.unroll(group):
            for j in T.unroll(hp):
                x1 = T.Cast("float32", Q[b, kvh * group + g, j * 32 + lane])
                x2 = T.Cast("float32", Q[b, kvh * group + g, half + j * 32 + lane])
                q_r[g * dpl + j] = T.Cast("float32", T.Cast("bfloat16", x1 * cs_r[j] - x2 * cs_r[hp + j])) * T.float32(scale)
                q_r[g * dpl + hp + j] = T.Cast("float32", T.Cast("bfloat16", x2 * cs_r[j] + x1 * cs_r[hp + j])) * T.float32(scale)
            for j in T.unroll(dpl):
                acc_r[g * dpl + j] = T.float32(0)
            m_r[g] = T.float32(NEG_BIG)
            l_r[g] = T.float32(0)
        # earlier keys of this warp: t = warp + NUM_WARPS * i < p (none when p <= warp)
        for i in T.serial((p - warp + (NUM_WARPS - 1)) // NUM_WARPS):
            t = warp + NUM_WARPS * i
            for j in T.unroll(dpl):
                k_r[j] = T.Cast("float32", KC[b, t, kvh, j * 32 + lane])
                v_r[j] = T.Cast("float32", VC[b, t, kvh, j * 32 + lane])
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
        if warp == 0:
            # rotate the new key, append it and the value at slot p, and score it from registers
            for j in T.unroll(hp):
                x1 = T.Cast("float32", KN[b, kvh, j * 32 + lane])
                x2 = T.Cast("float32", KN[b, kvh, half + j * 32 + lane])
                kb[j] = T.Cast("bfloat16", x1 * cs_r[j] - x2 * cs_r[hp + j])
                kb[hp + j] = T.Cast("bfloat16", x2 * cs_r[j] + x1 * cs_r[hp + j])
            for j in T.unroll(dpl):
                KC[b, p, kvh, j * 32 + lane] = kb[j]
                VC[b, p, kvh, j * 32 + lane] = VN[b, kvh, j * 32 + lane]
                k_r[j] = T.Cast("float32", kb[j])
                v_r[j] = T.Cast("float32", VN[b, kvh, j * 32 + lane])
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
            O[b, kvh * group + g2, d] = T.Cast("bfloat16", osum[0] / lsum[0])

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": rope_decode}), target=target, tir_pipeline="tirx")


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
    key = (batch, q_heads, kv_heads, head_dim, max_tokens, max_pos)
    if key not in _compiled:
        _compiled[key] = _build(*key)["main"]
    out = torch.empty_like(q)
    _compiled[key](q.contiguous(), k.contiguous(), v.contiguous(), k_cache, v_cache, cache_lens.contiguous(),
                   cos_sin_cache.contiguous(), out)
    return out
