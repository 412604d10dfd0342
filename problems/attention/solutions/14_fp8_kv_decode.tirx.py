"""TIRx (sm_90a) solution: one CTA of 8 warps per (sequence, KV head), serving the KV head's whole group of query
heads. Warp w walks the keys t = w, w + 8, ... of its sequence through the block table; each lane decodes
head_dim / 32 e4m3 codes (d = j * 32 + lane) of the token's K and V rows from their bits (read through uint8:
sign, 4-bit exponent with bias 7, 3-bit mantissa, subnormals included), the raw q . code dot products are summed
with warp shuffles and multiplied by the token's K scale, and the probability is multiplied by its V scale before
it weights the V codes. Every warp keeps an fp32 online softmax (running max, running sum, output accumulator)
per query head; the 8 partial states are merged through shared memory at the end."""
import math

import torch
import tvm
from tvm.script import tirx as T

NUM_WARPS = 8
THREADS = NUM_WARPS * 32
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _e4m3_value(code):
    """float32 value of a float8_e4m3fn bit pattern (uint8 expression); the NaN code is not expected."""
    w = T.Cast("uint32", code)
    e = (w >> T.uint32(3)) & T.uint32(15)
    m = w & T.uint32(7)
    sign = (w & T.uint32(0x80)) << T.uint32(24)
    normal = T.reinterpret("float32", sign | ((e + T.uint32(120)) << T.uint32(23)) | (m << T.uint32(20)))
    sub = T.Cast("float32", m) * T.float32(1.0 / 512.0)  # m * 2^-9
    return T.if_then_else(e == T.uint32(0), T.if_then_else(sign != T.uint32(0), -sub, sub), normal)


def _build(batch: int, q_heads: int, head_dim: int, num_pages: int, page_size: int, kv_heads: int,
           max_pages: int):
    group = q_heads // kv_heads
    dpl = head_dim // 32
    combine_iters = (group * head_dim + THREADS - 1) // THREADS
    max_tokens = max_pages * page_size
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def fp8_kv_decode(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, ks_ptr: T.handle, vs_ptr: T.handle,
                      bt_ptr: T.handle, cl_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, q_heads, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (num_pages, page_size, kv_heads, head_dim), "uint8")
        V = T.match_buffer(v_ptr, (num_pages, page_size, kv_heads, head_dim), "uint8")
        KS = T.match_buffer(ks_ptr, (num_pages, page_size, kv_heads), "float32")
        VS = T.match_buffer(vs_ptr, (num_pages, page_size, kv_heads), "float32")
        BT = T.match_buffer(bt_ptr, (batch, max_pages), "int32")
        CL = T.match_buffer(cl_ptr, (batch,), "int32")
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
        sc = T.alloc_local((6,), "float32")  # 0: score, 1: new max, 2: correction, 3: probability, 4/5: K/V scale
        warp = tx // 32
        lane = tx % 32
        for g in T.unroll(group):
            for j in T.unroll(dpl):
                q_r[g * dpl + j] = T.Cast("float32", Q[b, kvh * group + g, j * 32 + lane])
                acc_r[g * dpl + j] = T.float32(0)
            m_r[g] = T.float32(NEG_BIG)
            l_r[g] = T.float32(0)
        ctx = T.min(CL[b], max_tokens)
        # keys of this warp: t = warp + NUM_WARPS * i for i < ceil((ctx - warp) / NUM_WARPS) (0 when ctx <= warp)
        for i in T.serial((ctx - warp + (NUM_WARPS - 1)) // NUM_WARPS):
            t = warp + NUM_WARPS * i
            page = BT[b, t // page_size]
            slot = t % page_size
            for j in T.unroll(dpl):
                k_r[j] = _e4m3_value(K[page, slot, kvh, j * 32 + lane])
                v_r[j] = _e4m3_value(V[page, slot, kvh, j * 32 + lane])
            sc[4] = KS[page, slot, kvh] * T.float32(scale)
            sc[5] = VS[page, slot, kvh]
            for g in T.unroll(group):
                sc[0] = T.float32(0)
                for j in T.unroll(dpl):
                    sc[0] = sc[0] + q_r[g * dpl + j] * k_r[j]
                sc[0] = T.cuda.warp_sum(sc[0]) * sc[4]
                sc[1] = T.max(m_r[g], sc[0])
                sc[2] = T.exp(m_r[g] - sc[1])
                sc[3] = T.exp(sc[0] - sc[1])
                l_r[g] = l_r[g] * sc[2] + sc[3]
                m_r[g] = sc[1]
                sc[3] = sc[3] * sc[5]
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
            if e < group * head_dim:
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
    return tvm.compile(tvm.IRModule({"main": fp8_kv_decode}), target=target, tir_pipeline="tirx")


def solve(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, k_scale: torch.Tensor,
          v_scale: torch.Tensor, block_tables: torch.Tensor, context_lens: torch.Tensor):
    batch, q_heads, head_dim = q.shape
    num_pages, page_size, kv_heads, _ = k_cache.shape
    max_pages = block_tables.shape[1]
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    group = q_heads // kv_heads
    if head_dim % 32 != 0:
        raise ValueError("head_dim must be a multiple of 32")
    if NUM_WARPS * group * (head_dim + 2) * 4 > 48 * 1024:
        raise ValueError("the KV group's partial states do not fit in 48 KiB of shared memory")
    if q.dtype != torch.bfloat16:
        raise ValueError("expects a bfloat16 q")
    if k_cache.dtype != torch.float8_e4m3fn or v_cache.dtype != torch.float8_e4m3fn or v_cache.shape != k_cache.shape:
        raise ValueError("expects float8_e4m3fn K and V caches of one shape")
    if k_scale.dtype != torch.float32 or v_scale.dtype != torch.float32 or \
            tuple(k_scale.shape) != (num_pages, page_size, kv_heads) or v_scale.shape != k_scale.shape:
        raise ValueError("expects float32 scales shaped (num_pages, page_size, kv_heads)")
    if block_tables.dtype != torch.int32 or context_lens.dtype != torch.int32:
        raise ValueError("expects int32 block tables and context lengths")
    if k_cache.numel() >= 2**31:
        raise ValueError("KV cache too large for 32-bit indexing")
    key = (batch, q_heads, head_dim, num_pages, page_size, kv_heads, max_pages)
    if key not in _compiled:
        _compiled[key] = _build(*key)["main"]
    q = q.contiguous()
    k_bits = k_cache.contiguous().view(torch.uint8)  # the codes' bits, decoded in the kernel
    v_bits = v_cache.contiguous().view(torch.uint8)
    rest = [t.contiguous() for t in (k_scale, v_scale, block_tables, context_lens)]
    out = torch.empty_like(q)
    _compiled[key](q, k_bits, v_bits, *rest, out)
    return out
