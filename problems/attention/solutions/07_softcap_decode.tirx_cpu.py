"""CPU-target (LLVM) TIRx solution: for every (sequence, query head), three serial passes over the sequence's
keys, the same passes the GPU solutions spread over threads: (1) fp32 dot products scaled by 1/sqrt(d), capped as
50 * tanh(s / 50), and their running max; (2) exp(s - max) in place and their sum; (3) for each output element
the probability-weighted sum of the values, divided by the sum."""
import math

import torch
import tvm
from tvm.script import tirx as T

SOFTCAP = 50.0  # Gemma-2 attn_logit_softcapping
NEG_BIG = -1.0e30
_compiled = {}


def _build(batch: int, q_heads: int, head_dim: int, max_tokens: int, kv_heads: int):
    group = q_heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def softcap_decode(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, cl_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, q_heads, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, max_tokens, kv_heads, head_dim), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, max_tokens, kv_heads, head_dim), "bfloat16")
        CL = T.match_buffer(cl_ptr, (batch,), "int32")
        O = T.match_buffer(o_ptr, (batch, q_heads, head_dim), "bfloat16")
        scores = T.alloc_buffer((max_tokens,), "float32")
        red = T.alloc_buffer((4,), "float32")  # 0: dot product, 1: max, 2: sum of exp, 3: output accumulator
        for b in T.serial(batch):
            for h in T.serial(q_heads):
                kvh = h // group
                ctx = T.min(CL[b], max_tokens)
                red[1] = T.float32(NEG_BIG)
                for t in T.serial(ctx):
                    red[0] = T.float32(0)
                    for d in T.serial(head_dim):
                        red[0] = red[0] + T.Cast("float32", Q[b, h, d]) * T.Cast("float32", K[b, t, kvh, d])
                    scores[t] = T.float32(SOFTCAP) * T.tanh(red[0] * T.float32(scale / SOFTCAP))
                    red[1] = T.max(red[1], scores[t])
                red[2] = T.float32(0)
                for t in T.serial(ctx):
                    scores[t] = T.exp(scores[t] - red[1])
                    red[2] = red[2] + scores[t]
                for d in T.serial(head_dim):
                    red[3] = T.float32(0)
                    for t in T.serial(ctx):
                        red[3] = red[3] + scores[t] * T.Cast("float32", V[b, t, kvh, d])
                    O[b, h, d] = T.Cast("bfloat16", red[3] / red[2])

    return tvm.compile(tvm.IRModule({"main": softcap_decode}), target="llvm", tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, context_lens: torch.Tensor):
    batch, q_heads, head_dim = q.shape
    cache_batch, max_tokens, kv_heads, cache_dim = k_cache.shape
    if cache_batch != batch or cache_dim != head_dim or v_cache.shape != k_cache.shape:
        raise ValueError("KV cache must be (batch, max_context, kv_heads, head_dim) for both K and V")
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    if q.dtype != torch.bfloat16 or k_cache.dtype != torch.bfloat16 or v_cache.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q and caches")
    if context_lens.dtype != torch.int32:
        raise ValueError("expects int32 context lengths")
    key = (batch, q_heads, head_dim, max_tokens, kv_heads)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    q = q.contiguous()
    k_cache = k_cache.contiguous()
    v_cache = v_cache.contiguous()
    context_lens = context_lens.contiguous()
    out = torch.empty_like(q)
    _compiled[key](q, k_cache, v_cache, context_lens, out)
    return out
