"""CPU-target (LLVM) TIRx solution: for every new token, a scan of cu_seqlens_q finds its sequence, which gives its
absolute position p and the absolute position of the sequence's first packed key; the visible keys are then the
contiguous packed range from max(chunk start floor(p / C) * C, first key) to p itself. For every query head, serial
loops compute the fp32 scaled scores of that range, their max, the softmax denominator and the probability-weighted
sum of the values."""
import math

import torch
import tvm
from tvm.script import tirx as T

NEG_BIG = -1.0e30
_compiled = {}


def _build(q_tokens: int, k_tokens: int, q_heads: int, kv_heads: int, head_dim: int, batch: int, chunk: int):
    group = q_heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def chunked_local_prefill(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, cuq_ptr: T.handle,
                              cuk_ptr: T.handle, sp_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (q_tokens, q_heads, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (k_tokens, kv_heads, head_dim), "bfloat16")
        V = T.match_buffer(v_ptr, (k_tokens, kv_heads, head_dim), "bfloat16")
        CUQ = T.match_buffer(cuq_ptr, (batch + 1,), "int32")
        CUK = T.match_buffer(cuk_ptr, (batch + 1,), "int32")
        SP = T.match_buffer(sp_ptr, (batch,), "int32")
        O = T.match_buffer(o_ptr, (q_tokens, q_heads, head_dim), "bfloat16")
        scores = T.alloc_buffer((chunk,), "float32")
        acc = T.alloc_buffer((head_dim,), "float32")
        red = T.alloc_buffer((3,), "float32")  # 0: dot product, 1: max, 2: sum of exp
        seq = T.alloc_buffer((1,), "int32")
        rng = T.alloc_buffer((2,), "int32")  # 0: first visible packed key, 1: number of visible keys
        for t in T.serial(q_tokens):
            seq[0] = 0
            for i in T.serial(batch):
                if CUQ[i] <= t:
                    seq[0] = i
            s = seq[0]
            p = SP[s] + (t - CUQ[s])  # absolute position of the query
            k_abs0 = SP[s] + (CUQ[s + 1] - CUQ[s]) - (CUK[s + 1] - CUK[s])  # absolute position of the first key
            lo = T.max((p // chunk) * chunk, k_abs0)
            rng[0] = CUK[s] + (lo - k_abs0)
            rng[1] = p - lo + 1
            for h in T.serial(q_heads):
                kvh = h // group
                red[1] = T.float32(NEG_BIG)
                for j in T.serial(rng[1]):
                    red[0] = T.float32(0)
                    for d in T.serial(head_dim):
                        red[0] = red[0] + T.Cast("float32", Q[t, h, d]) * T.Cast("float32", K[rng[0] + j, kvh, d])
                    scores[j] = red[0] * T.float32(scale)
                    red[1] = T.max(red[1], scores[j])
                red[2] = T.float32(0)
                for d in T.serial(head_dim):
                    acc[d] = T.float32(0)
                for j in T.serial(rng[1]):
                    scores[j] = T.exp(scores[j] - red[1])
                    red[2] = red[2] + scores[j]
                    for d in T.serial(head_dim):
                        acc[d] = acc[d] + scores[j] * T.Cast("float32", V[rng[0] + j, kvh, d])
                for d in T.serial(head_dim):
                    O[t, h, d] = T.Cast("bfloat16", acc[d] / red[2])

    return tvm.compile(tvm.IRModule({"main": chunked_local_prefill}), target="llvm", tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
          cu_seqlens_k: torch.Tensor, start_pos: torch.Tensor, chunk_size: int):
    q_tokens, q_heads, head_dim = q.shape
    k_tokens, kv_heads, _ = k.shape
    batch = start_pos.shape[0]
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    if k.shape != (k_tokens, kv_heads, head_dim) or v.shape != k.shape:
        raise ValueError("k and v must be (k_tokens, kv_heads, head_dim) with q's head_dim")
    if cu_seqlens_q.shape != (batch + 1,) or cu_seqlens_k.shape != (batch + 1,):
        raise ValueError("cu_seqlens_q and cu_seqlens_k must have batch + 1 entries")
    if q.dtype != torch.bfloat16 or k.dtype != torch.bfloat16 or v.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q, k and v")
    for x in (cu_seqlens_q, cu_seqlens_k, start_pos):
        if x.dtype != torch.int32:
            raise ValueError("expects int32 cu_seqlens and start positions")
    chunk = int(chunk_size)
    if chunk <= 0:
        raise ValueError("chunk_size must be positive")
    key = (q_tokens, k_tokens, q_heads, kv_heads, head_dim, batch, chunk)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    q = q.contiguous()
    k = k.contiguous()
    v = v.contiguous()
    out = torch.empty_like(q)
    _compiled[key](q, k, v, cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous(), start_pos.contiguous(), out)
    return out
