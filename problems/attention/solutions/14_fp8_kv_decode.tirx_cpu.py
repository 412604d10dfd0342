"""CPU-target (LLVM) TIRx solution: for every (sequence, query head), serial loops walk the sequence's tokens through
the block table; each e4m3 code is decoded exactly from its bits (read through a uint8 view: sign, 4-bit exponent
with bias 7, 3-bit mantissa, subnormals included), the raw fp32 dot product q . code is multiplied by the token's K
scale and 1 / sqrt(d), then the max, the softmax denominator and the sum of probability * V scale * V code give the
output."""
import math

import torch
import tvm
from tvm.script import tirx as T

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
        scores = T.alloc_buffer((max_tokens,), "float32")
        acc = T.alloc_buffer((head_dim,), "float32")
        red = T.alloc_buffer((4,), "float32")  # 0: dot product, 1: max, 2: sum of exp, 3: p * V scale
        for b in T.serial(batch):
            for h in T.serial(q_heads):
                kvh = h // group
                ctx = T.min(CL[b], max_tokens)
                red[1] = T.float32(-1.0e30)
                for t in T.serial(ctx):
                    red[0] = T.float32(0)
                    for d in T.serial(head_dim):
                        red[0] = red[0] + T.Cast("float32", Q[b, h, d]) * _e4m3_value(
                            K[BT[b, t // page_size], t % page_size, kvh, d])
                    scores[t] = red[0] * KS[BT[b, t // page_size], t % page_size, kvh] * T.float32(scale)
                    red[1] = T.max(red[1], scores[t])
                red[2] = T.float32(0)
                for d in T.serial(head_dim):
                    acc[d] = T.float32(0)
                for t in T.serial(ctx):
                    scores[t] = T.exp(scores[t] - red[1])
                    red[2] = red[2] + scores[t]
                    red[3] = scores[t] * VS[BT[b, t // page_size], t % page_size, kvh]
                    for d in T.serial(head_dim):
                        acc[d] = acc[d] + red[3] * _e4m3_value(V[BT[b, t // page_size], t % page_size, kvh, d])
                for d in T.serial(head_dim):
                    O[b, h, d] = T.Cast("bfloat16", acc[d] / red[2])

    return tvm.compile(tvm.IRModule({"main": fp8_kv_decode}), target="llvm", tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, k_scale: torch.Tensor,
          v_scale: torch.Tensor, block_tables: torch.Tensor, context_lens: torch.Tensor):
    batch, q_heads, head_dim = q.shape
    num_pages, page_size, kv_heads, _ = k_cache.shape
    max_pages = block_tables.shape[1]
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    if q.dtype != torch.bfloat16:
        raise ValueError("expects a bfloat16 q")
    if k_cache.dtype != torch.float8_e4m3fn or v_cache.dtype != torch.float8_e4m3fn or v_cache.shape != k_cache.shape:
        raise ValueError("expects float8_e4m3fn K and V caches of one shape")
    if k_scale.dtype != torch.float32 or v_scale.dtype != torch.float32 or \
            tuple(k_scale.shape) != (num_pages, page_size, kv_heads) or v_scale.shape != k_scale.shape:
        raise ValueError("expects float32 scales shaped (num_pages, page_size, kv_heads)")
    if block_tables.dtype != torch.int32 or context_lens.dtype != torch.int32:
        raise ValueError("expects int32 block tables and context lengths")
    key = (batch, q_heads, head_dim, num_pages, page_size, kv_heads, max_pages)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    q = q.contiguous()
    k_bits = k_cache.contiguous().view(torch.uint8)  # the codes' bits, decoded in the kernel
    v_bits = v_cache.contiguous().view(torch.uint8)
    rest = [t.contiguous() for t in (k_scale, v_scale, block_tables, context_lens)]
    out = torch.empty_like(q)
    _compiled[key](q, k_bits, v_bits, *rest, out)
    return out
