"""CPU-target (LLVM) TIRx solution: for every (token, query head), a scan of cu_seqlens finds the start of the
token's sequence; serial loops then compute the fp32 scaled scores of the keys from that start up to the token
itself (the causal range), their max, the softmax denominator and the probability-weighted sum of the values."""
import math

import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(total: int, q_heads: int, kv_heads: int, head_dim: int, batch: int):
    group = q_heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def varlen_causal_prefill(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, cu_ptr: T.handle,
                              o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (total, q_heads, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (total, kv_heads, head_dim), "bfloat16")
        V = T.match_buffer(v_ptr, (total, kv_heads, head_dim), "bfloat16")
        CU = T.match_buffer(cu_ptr, (batch + 1,), "int32")
        O = T.match_buffer(o_ptr, (total, q_heads, head_dim), "bfloat16")
        scores = T.alloc_buffer((total,), "float32")
        acc = T.alloc_buffer((head_dim,), "float32")
        red = T.alloc_buffer((3,), "float32")  # 0: dot product, 1: max, 2: sum of exp
        start = T.alloc_buffer((1,), "int32")
        for t in T.serial(total):
            # the sequence of token t starts at the last cu_seqlens entry <= t
            start[0] = 0
            for i in T.serial(batch):
                if CU[i] <= t:
                    start[0] = CU[i]
            for h in T.serial(q_heads):
                kvh = h // group
                red[1] = T.float32(-1.0e30)
                for j in T.serial(t + 1 - start[0]):
                    red[0] = T.float32(0)
                    for d in T.serial(head_dim):
                        red[0] = red[0] + T.Cast("float32", Q[t, h, d]) * T.Cast("float32",
                                                                                  K[start[0] + j, kvh, d])
                    scores[j] = red[0] * T.float32(scale)
                    red[1] = T.max(red[1], scores[j])
                red[2] = T.float32(0)
                for d in T.serial(head_dim):
                    acc[d] = T.float32(0)
                for j in T.serial(t + 1 - start[0]):
                    scores[j] = T.exp(scores[j] - red[1])
                    red[2] = red[2] + scores[j]
                    for d in T.serial(head_dim):
                        acc[d] = acc[d] + scores[j] * T.Cast("float32", V[start[0] + j, kvh, d])
                for d in T.serial(head_dim):
                    O[t, h, d] = T.Cast("bfloat16", acc[d] / red[2])

    return tvm.compile(tvm.IRModule({"main": varlen_causal_prefill}), target="llvm", tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor):
    total, q_heads, head_dim = q.shape
    kv_heads = k.shape[1]
    batch = cu_seqlens.shape[0] - 1
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    if k.shape != (total, kv_heads, head_dim) or v.shape != k.shape:
        raise ValueError("q, k and v must hold the same tokens and head_dim; k and v the same shape")
    if q.dtype != torch.bfloat16 or k.dtype != torch.bfloat16 or v.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q, k and v")
    if cu_seqlens.dtype != torch.int32:
        raise ValueError("expects int32 cu_seqlens")
    key = (total, q_heads, kv_heads, head_dim, batch)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    q = q.contiguous()
    k = k.contiguous()
    v = v.contiguous()
    cu_seqlens = cu_seqlens.contiguous()
    out = torch.empty_like(q)
    _compiled[key](q, k, v, cu_seqlens, out)
    return out
