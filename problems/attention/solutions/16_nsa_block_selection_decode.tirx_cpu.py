"""CPU-target (LLVM) TIRx solution: for every (sequence, query head), serial loops walk the selected block slots of
the head's KV head, skip unused (-1) slots, and score the block's tokens that lie before the sequence's length
(fp32, read straight from the head-major cache at block * 64 + offset); then their max, the softmax denominator and
the probability-weighted sum of the gathered values."""
import math

import torch
import tvm
from tvm.script import tirx as T

BLOCK_SIZE = 64  # NSA selection block size
NEG_BIG = -1.0e30
_compiled = {}


def _build(batch: int, q_heads: int, head_dim: int, kv_heads: int, max_tokens: int, top_n: int):
    group = q_heads // kv_heads
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
        scores = T.alloc_buffer((top_n * BLOCK_SIZE,), "float32")
        acc = T.alloc_buffer((head_dim,), "float32")
        red = T.alloc_buffer((3,), "float32")  # 0: dot product, 1: max, 2: sum of exp
        for b in T.serial(batch):
            for h in T.serial(q_heads):
                kvh = h // group
                ctx = T.min(CL[b], max_tokens)
                red[1] = T.float32(NEG_BIG)
                for i in T.serial(top_n):
                    for o in T.serial(BLOCK_SIZE):
                        t = BI[b, kvh, i] * BLOCK_SIZE + o
                        if BI[b, kvh, i] >= 0 and t < ctx:
                            red[0] = T.float32(0)
                            for d in T.serial(head_dim):
                                red[0] = red[0] + T.Cast("float32", Q[b, h, d]) * T.Cast("float32", K[b, kvh, t, d])
                            scores[i * BLOCK_SIZE + o] = red[0] * T.float32(scale)
                            red[1] = T.max(red[1], scores[i * BLOCK_SIZE + o])
                red[2] = T.float32(0)
                for d in T.serial(head_dim):
                    acc[d] = T.float32(0)
                for i in T.serial(top_n):
                    for o in T.serial(BLOCK_SIZE):
                        t = BI[b, kvh, i] * BLOCK_SIZE + o
                        if BI[b, kvh, i] >= 0 and t < ctx:
                            scores[i * BLOCK_SIZE + o] = T.exp(scores[i * BLOCK_SIZE + o] - red[1])
                            red[2] = red[2] + scores[i * BLOCK_SIZE + o]
                            for d in T.serial(head_dim):
                                acc[d] = acc[d] + scores[i * BLOCK_SIZE + o] * T.Cast("float32", V[b, kvh, t, d])
                for d in T.serial(head_dim):
                    O[b, h, d] = T.Cast("bfloat16", acc[d] / red[2])

    return tvm.compile(tvm.IRModule({"main": nsa_selection_decode}), target="llvm", tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_indices: torch.Tensor,
          context_lens: torch.Tensor):
    batch, q_heads, head_dim = q.shape
    _, kv_heads, max_tokens, _ = k_cache.shape
    top_n = block_indices.shape[2]
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    if k_cache.shape != (batch, kv_heads, max_tokens, head_dim) or v_cache.shape != k_cache.shape:
        raise ValueError("k_cache and v_cache must be (batch, kv_heads, max_context, head_dim)")
    if block_indices.shape[:2] != (batch, kv_heads):
        raise ValueError("block_indices must be (batch, kv_heads, top_n)")
    if q.dtype != torch.bfloat16 or k_cache.dtype != torch.bfloat16 or v_cache.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q and caches")
    if block_indices.dtype != torch.int32 or context_lens.dtype != torch.int32:
        raise ValueError("expects int32 block indices and context lengths")
    key = (batch, q_heads, head_dim, kv_heads, max_tokens, top_n)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    q = q.contiguous()
    k_cache = k_cache.contiguous()
    v_cache = v_cache.contiguous()
    block_indices = block_indices.contiguous()
    context_lens = context_lens.contiguous()
    out = torch.empty_like(q)
    _compiled[key](q, k_cache, v_cache, block_indices, context_lens, out)
    return out
