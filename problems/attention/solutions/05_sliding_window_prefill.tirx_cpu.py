"""CPU-target (LLVM) TIRx solution: for every (sequence, query head, query position i), serial loops compute the
fp32 scaled scores of the keys in the band max(0, i - window + 1) .. i, their max, the softmax denominator and the
probability-weighted sum of the values."""
import math

import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(batch: int, q_heads: int, kv_heads: int, seq: int, head_dim: int, window: int):
    group = q_heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim)
    band = min(window, seq)

    @T.prim_func
    def sliding_window_prefill(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, q_heads, seq, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, kv_heads, seq, head_dim), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, kv_heads, seq, head_dim), "bfloat16")
        O = T.match_buffer(o_ptr, (batch, q_heads, seq, head_dim), "bfloat16")
        scores = T.alloc_buffer((band,), "float32")
        acc = T.alloc_buffer((head_dim,), "float32")
        red = T.alloc_buffer((3,), "float32")  # 0: dot product, 1: max, 2: sum of exp
        for b in T.serial(batch):
            for h in T.serial(q_heads):
                kvh = h // group
                for i in T.serial(seq):
                    lo = T.max(i - (window - 1), 0)  # first key of the band
                    red[1] = T.float32(-1.0e30)
                    for j in T.serial(i + 1 - lo):
                        red[0] = T.float32(0)
                        for d in T.serial(head_dim):
                            red[0] = red[0] + T.Cast("float32", Q[b, h, i, d]) * T.Cast("float32",
                                                                                         K[b, kvh, lo + j, d])
                        scores[j] = red[0] * T.float32(scale)
                        red[1] = T.max(red[1], scores[j])
                    red[2] = T.float32(0)
                    for d in T.serial(head_dim):
                        acc[d] = T.float32(0)
                    for j in T.serial(i + 1 - lo):
                        scores[j] = T.exp(scores[j] - red[1])
                        red[2] = red[2] + scores[j]
                        for d in T.serial(head_dim):
                            acc[d] = acc[d] + scores[j] * T.Cast("float32", V[b, kvh, lo + j, d])
                    for d in T.serial(head_dim):
                        O[b, h, i, d] = T.Cast("bfloat16", acc[d] / red[2])

    return tvm.compile(tvm.IRModule({"main": sliding_window_prefill}), target="llvm", tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int):
    batch, q_heads, seq, head_dim = q.shape
    kv_heads = k.shape[1]
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    if k.shape != (batch, kv_heads, seq, head_dim) or v.shape != k.shape:
        raise ValueError("q, k and v must share batch, seq and head_dim; k and v the same shape")
    if q.dtype != torch.bfloat16 or k.dtype != torch.bfloat16 or v.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q, k and v")
    if not isinstance(window, int) or window < 1:
        raise ValueError("window must be a positive int")
    key = (batch, q_heads, kv_heads, seq, head_dim, window)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    q = q.contiguous()
    k = k.contiguous()
    v = v.contiguous()
    out = torch.empty_like(q)
    _compiled[key](q, k, v, out)
    return out
