"""CPU-target (LLVM) TIRx solution: for every sequence, serial loops first rotate the new key of each KV head by
the token's position (cos/sin read from the cache table at cache_lens[b], fp32 math, bf16 result) and append it and
the value at slot cache_lens[b]; then, for every query head, they rotate the query (rounded to bf16 like the real
op's rotated query), compute the fp32 scaled scores of keys 0 .. cache_lens[b] (the new key included), their max,
the softmax denominator and the probability-weighted sum of the values."""
import math

import torch
import tvm
from tvm.script import tirx as T

NEG_BIG = -1.0e30
_compiled = {}


def _build(batch: int, q_heads: int, kv_heads: int, head_dim: int, max_tokens: int, max_pos: int):
    group = q_heads // kv_heads
    half = head_dim // 2
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
        qr = T.alloc_buffer((head_dim,), "float32")
        scores = T.alloc_buffer((max_tokens,), "float32")
        acc = T.alloc_buffer((head_dim,), "float32")
        red = T.alloc_buffer((3,), "float32")  # 0: dot product, 1: max, 2: sum of exp
        for b in T.serial(batch):
            p = CL[b]
            for kvh in T.serial(kv_heads):
                for i in T.serial(half):
                    x1 = T.Cast("float32", KN[b, kvh, i])
                    x2 = T.Cast("float32", KN[b, kvh, i + half])
                    KC[b, p, kvh, i] = T.Cast("bfloat16", x1 * CS[p, i] - x2 * CS[p, i + half])
                    KC[b, p, kvh, i + half] = T.Cast("bfloat16", x2 * CS[p, i] + x1 * CS[p, i + half])
                for i in T.serial(head_dim):
                    VC[b, p, kvh, i] = VN[b, kvh, i]
            for h in T.serial(q_heads):
                kvh = h // group
                for i in T.serial(half):
                    x1 = T.Cast("float32", Q[b, h, i])
                    x2 = T.Cast("float32", Q[b, h, i + half])
                    qr[i] = T.Cast("float32", T.Cast("bfloat16", x1 * CS[p, i] - x2 * CS[p, i + half]))
                    qr[i + half] = T.Cast("float32", T.Cast("bfloat16", x2 * CS[p, i] + x1 * CS[p, i + half]))
                red[1] = T.float32(NEG_BIG)
                for t in T.serial(p + 1):
                    red[0] = T.float32(0)
                    for d in T.serial(head_dim):
                        red[0] = red[0] + qr[d] * T.Cast("float32", KC[b, t, kvh, d])
                    scores[t] = red[0] * T.float32(scale)
                    red[1] = T.max(red[1], scores[t])
                red[2] = T.float32(0)
                for d in T.serial(head_dim):
                    acc[d] = T.float32(0)
                for t in T.serial(p + 1):
                    scores[t] = T.exp(scores[t] - red[1])
                    red[2] = red[2] + scores[t]
                    for d in T.serial(head_dim):
                        acc[d] = acc[d] + scores[t] * T.Cast("float32", VC[b, t, kvh, d])
                for d in T.serial(head_dim):
                    O[b, h, d] = T.Cast("bfloat16", acc[d] / red[2])

    return tvm.compile(tvm.IRModule({"main": rope_decode}), target="llvm", tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
          cache_lens: torch.Tensor, cos_sin_cache: torch.Tensor):
    batch, q_heads, head_dim = q.shape
    _, max_tokens, kv_heads, _ = k_cache.shape
    max_pos = cos_sin_cache.shape[0]
    if q_heads % kv_heads != 0 or head_dim % 2 != 0:
        raise ValueError("query heads must be a multiple of KV heads and head_dim even")
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
    key = (batch, q_heads, kv_heads, head_dim, max_tokens, max_pos)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    out = torch.empty_like(q)
    _compiled[key](q.contiguous(), k.contiguous(), v.contiguous(), k_cache, v_cache, cache_lens.contiguous(),
                   cos_sin_cache.contiguous(), out)
    return out
