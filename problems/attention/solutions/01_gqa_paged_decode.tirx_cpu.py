"""CPU-target (LLVM) TIRx solution: for every (sequence, query head), serial loops compute the scaled scores of the
sequence's keys (looked up through the block table) in fp32, then their max, the softmax denominator and the
probability-weighted sum of the values."""
import math

import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(batch: int, q_heads: int, head_dim: int, num_pages: int, page_size: int, kv_heads: int,
           max_pages: int):
    group = q_heads // kv_heads
    max_tokens = max_pages * page_size
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def gqa_paged_decode(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, bt_ptr: T.handle, cl_ptr: T.handle,
                         o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, q_heads, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (num_pages, page_size, kv_heads, head_dim), "bfloat16")
        V = T.match_buffer(v_ptr, (num_pages, page_size, kv_heads, head_dim), "bfloat16")
        BT = T.match_buffer(bt_ptr, (batch, max_pages), "int32")
        CL = T.match_buffer(cl_ptr, (batch,), "int32")
        O = T.match_buffer(o_ptr, (batch, q_heads, head_dim), "bfloat16")
        scores = T.alloc_buffer((max_tokens,), "float32")
        acc = T.alloc_buffer((head_dim,), "float32")
        red = T.alloc_buffer((3,), "float32")  # 0: dot product, 1: max, 2: sum of exp
        for b in T.serial(batch):
            for h in T.serial(q_heads):
                kvh = h // group
                ctx = T.min(CL[b], max_tokens)
                red[1] = T.float32(-1.0e30)
                for t in T.serial(ctx):
                    red[0] = T.float32(0)
                    for d in T.serial(head_dim):
                        red[0] = red[0] + T.Cast("float32", Q[b, h, d]) * T.Cast(
                            "float32", K[BT[b, t // page_size], t % page_size, kvh, d])
                    scores[t] = red[0] * T.float32(scale)
                    red[1] = T.max(red[1], scores[t])
                red[2] = T.float32(0)
                for d in T.serial(head_dim):
                    acc[d] = T.float32(0)
                for t in T.serial(ctx):
                    scores[t] = T.exp(scores[t] - red[1])
                    red[2] = red[2] + scores[t]
                    for d in T.serial(head_dim):
                        acc[d] = acc[d] + scores[t] * T.Cast(
                            "float32", V[BT[b, t // page_size], t % page_size, kvh, d])
                for d in T.serial(head_dim):
                    O[b, h, d] = T.Cast("bfloat16", acc[d] / red[2])

    return tvm.compile(tvm.IRModule({"main": gqa_paged_decode}), target="llvm", tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_tables: torch.Tensor,
          context_lens: torch.Tensor):
    batch, q_heads, head_dim = q.shape
    num_pages, page_size, kv_heads, _ = k_cache.shape
    max_pages = block_tables.shape[1]
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    if block_tables.dtype != torch.int32 or context_lens.dtype != torch.int32:
        raise ValueError("expects int32 block tables and context lengths")
    key = (batch, q_heads, head_dim, num_pages, page_size, kv_heads, max_pages)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    q = q.contiguous()
    k_cache = k_cache.contiguous()
    v_cache = v_cache.contiguous()
    block_tables = block_tables.contiguous()
    context_lens = context_lens.contiguous()
    out = torch.empty_like(q)
    _compiled[key](q, k_cache, v_cache, block_tables, context_lens, out)
    return out
