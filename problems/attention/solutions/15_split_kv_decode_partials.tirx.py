"""TIRx (sm_90a) solution: a 3-D grid of CTAs, one per (KV split of 512 tokens, KV head, sequence), each of 8 warps
serving the KV head's whole group of query heads. Warp w walks the split's keys lo + w, lo + w + 8, ... that lie
before the sequence's length; each lane holds head_dim / 32 elements (d = j * 32 + lane) of every query head of the
group, the dot products are summed with warp shuffles, and every warp keeps an fp32 online softmax (running max,
running sum, output accumulator) per query head. The 8 warp states are merged through shared memory into the
split's normalised fp32 output and its log-sum-exp max + log(sum); a split with no keys (sum 0) writes output 0
and log-sum-exp -inf."""
import math

import torch
import tvm
from tvm.script import tirx as T

SPLIT_SIZE = 512  # KV tokens per split
NUM_WARPS = 8
THREADS = NUM_WARPS * 32
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _build(batch: int, q_heads: int, head_dim: int, max_tokens: int, kv_heads: int):
    group = q_heads // kv_heads
    dpl = head_dim // 32
    combine_iters = (group * head_dim) // THREADS
    num_splits = (max_tokens + SPLIT_SIZE - 1) // SPLIT_SIZE
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def split_kv_partials(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, cl_ptr: T.handle, o_ptr: T.handle,
                          lse_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, q_heads, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, max_tokens, kv_heads, head_dim), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, max_tokens, kv_heads, head_dim), "bfloat16")
        CL = T.match_buffer(cl_ptr, (batch,), "int32")
        O = T.match_buffer(o_ptr, (batch, q_heads, num_splits, head_dim), "float32")
        LSE = T.match_buffer(lse_ptr, (batch, q_heads, num_splits), "float32")
        T.device_entry()
        sp, kvh, b = T.cta_id([num_splits, kv_heads, batch])
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
                q_r[g * dpl + j] = T.Cast("float32", Q[b, kvh * group + g, j * 32 + lane]) * T.float32(scale)
                acc_r[g * dpl + j] = T.float32(0)
            m_r[g] = T.float32(NEG_BIG)
            l_r[g] = T.float32(0)
        lo = sp * SPLIT_SIZE
        n = T.max(T.min(T.min(CL[b], max_tokens) - lo, SPLIT_SIZE), 0)  # keys of this split before the length
        # keys of this warp: lo + warp + NUM_WARPS * i for i < ceil((n - warp) / NUM_WARPS) (0 when n <= warp)
        for i in T.serial((n - warp + (NUM_WARPS - 1)) // NUM_WARPS):
            t = lo + warp + NUM_WARPS * i
            for j in T.unroll(dpl):
                k_r[j] = T.Cast("float32", K[b, t, kvh, j * 32 + lane])
                v_r[j] = T.Cast("float32", V[b, t, kvh, j * 32 + lane])
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
            if lsum[0] > T.float32(0):
                O[b, kvh * group + g2, sp, d] = osum[0] / lsum[0]
                if d == 0:
                    LSE[b, kvh * group + g2, sp] = mx[0] + T.log(lsum[0])
            else:
                O[b, kvh * group + g2, sp, d] = T.float32(0)
                if d == 0:
                    LSE[b, kvh * group + g2, sp] = T.float32(float("-inf"))

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": split_kv_partials}), target=target, tir_pipeline="tirx")


def solve(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, context_lens: torch.Tensor):
    batch, q_heads, head_dim = q.shape
    _, max_tokens, kv_heads, _ = k_cache.shape
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    group = q_heads // kv_heads
    if head_dim % 32 != 0 or (group * head_dim) % THREADS != 0:
        raise ValueError(f"head_dim must be a multiple of 32 and group * head_dim of {THREADS}")
    if k_cache.shape != (batch, max_tokens, kv_heads, head_dim) or v_cache.shape != k_cache.shape:
        raise ValueError("k_cache and v_cache must be (batch, max_context, kv_heads, head_dim)")
    if q.dtype != torch.bfloat16 or k_cache.dtype != torch.bfloat16 or v_cache.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q and caches")
    if context_lens.dtype != torch.int32:
        raise ValueError("expects int32 context lengths")
    if k_cache.numel() >= 2**31:
        raise ValueError("KV cache too large for 32-bit indexing")
    num_splits = (max_tokens + SPLIT_SIZE - 1) // SPLIT_SIZE
    key = (batch, q_heads, head_dim, max_tokens, kv_heads)
    if key not in _compiled:
        _compiled[key] = _build(*key)["main"]
    q = q.contiguous()
    k_cache = k_cache.contiguous()
    v_cache = v_cache.contiguous()
    context_lens = context_lens.contiguous()
    out = torch.empty(batch, q_heads, num_splits, head_dim, dtype=torch.float32, device=q.device)
    lse = torch.empty(batch, q_heads, num_splits, dtype=torch.float32, device=q.device)
    _compiled[key](q, k_cache, v_cache, context_lens, out, lse)
    return out, lse
