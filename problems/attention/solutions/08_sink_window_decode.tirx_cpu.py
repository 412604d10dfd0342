"""CPU-target (LLVM) TIRx solution: for every (sequence, query head), the window is keys [lo, len) with
lo = max(0, len - 128); three serial passes over it, the same passes the GPU solutions spread over threads:
(1) fp32 dot products scaled by 1/sqrt(d) and their max, starting from the head's sink logit; (2) exp(s - max)
in place and their sum, starting from exp(sink - max); (3) for each output element the probability-weighted sum
of the window's values, divided by that sum."""
import math

import torch
import tvm
from tvm.script import tirx as T

WINDOW = 128  # gpt-oss sliding_window
_compiled = {}


def _build(batch: int, q_heads: int, head_dim: int, kv_heads: int, max_tokens: int):
    group = q_heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def sink_window_decode(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, sink_ptr: T.handle,
                           cl_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, q_heads, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, kv_heads, max_tokens, head_dim), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, kv_heads, max_tokens, head_dim), "bfloat16")
        S = T.match_buffer(sink_ptr, (q_heads,), "float32")
        CL = T.match_buffer(cl_ptr, (batch,), "int32")
        O = T.match_buffer(o_ptr, (batch, q_heads, head_dim), "bfloat16")
        scores = T.alloc_buffer((WINDOW,), "float32")
        red = T.alloc_buffer((4,), "float32")  # 0: dot product, 1: max, 2: denominator, 3: output accumulator
        for b in T.serial(batch):
            for h in T.serial(q_heads):
                kvh = h // group
                ctx = T.min(CL[b], max_tokens)
                lo = T.max(ctx - WINDOW, 0)
                red[1] = S[h]
                for j in T.serial(ctx - lo):
                    red[0] = T.float32(0)
                    for d in T.serial(head_dim):
                        red[0] = red[0] + T.Cast("float32", Q[b, h, d]) * T.Cast("float32", K[b, kvh, lo + j, d])
                    scores[j] = red[0] * T.float32(scale)
                    red[1] = T.max(red[1], scores[j])
                red[2] = T.exp(S[h] - red[1])
                for j in T.serial(ctx - lo):
                    scores[j] = T.exp(scores[j] - red[1])
                    red[2] = red[2] + scores[j]
                for d in T.serial(head_dim):
                    red[3] = T.float32(0)
                    for j in T.serial(ctx - lo):
                        red[3] = red[3] + scores[j] * T.Cast("float32", V[b, kvh, lo + j, d])
                    O[b, h, d] = T.Cast("bfloat16", red[3] / red[2])

    return tvm.compile(tvm.IRModule({"main": sink_window_decode}), target="llvm", tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, sinks: torch.Tensor,
          context_lens: torch.Tensor):
    batch, q_heads, head_dim = q.shape
    cache_batch, kv_heads, max_tokens, cache_dim = k_cache.shape
    if cache_batch != batch or cache_dim != head_dim or v_cache.shape != k_cache.shape:
        raise ValueError("KV cache must be (batch, kv_heads, max_context, head_dim) for both K and V")
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    if q.dtype != torch.bfloat16 or k_cache.dtype != torch.bfloat16 or v_cache.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q and caches")
    if sinks.dtype != torch.float32 or tuple(sinks.shape) != (q_heads,):
        raise ValueError("expects one float32 sink logit per query head")
    if context_lens.dtype != torch.int32:
        raise ValueError("expects int32 context lengths")
    key = (batch, q_heads, head_dim, kv_heads, max_tokens)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    q = q.contiguous()
    k_cache = k_cache.contiguous()
    v_cache = v_cache.contiguous()
    sinks = sinks.contiguous()
    context_lens = context_lens.contiguous()
    out = torch.empty_like(q)
    _compiled[key](q, k_cache, v_cache, sinks, context_lens, out)
    return out
