"""CPU-target (LLVM) TIRx solution: for every (sequence, head, query row i), the same two passes the GPU solutions
spread over threads, after Delta = sum_d dO[i, d] * o[i, d]: (1) for each key j <= i, the fp32 probability
p = exp(scale * q_i . k_j - lse_i) recomputed from the saved log-sum-exp, dp = dO_i . v_j, and
ds_j = p * (dp - Delta) into a score row; (2) for each element d, dQ[i, d] = scale * sum_j ds_j * k[j, d]."""
import math

import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(batch: int, seq: int, heads: int, kv_heads: int, head_dim: int):
    group = heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def attention_bwd_dq(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, o_ptr: T.handle, do_ptr: T.handle,
                         lse_ptr: T.handle, dq_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, seq, heads, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, seq, kv_heads, head_dim), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, seq, kv_heads, head_dim), "bfloat16")
        O = T.match_buffer(o_ptr, (batch, seq, heads, head_dim), "bfloat16")
        DO = T.match_buffer(do_ptr, (batch, seq, heads, head_dim), "bfloat16")
        LSE = T.match_buffer(lse_ptr, (batch, heads, seq), "float32")
        DQ = T.match_buffer(dq_ptr, (batch, seq, heads, head_dim), "float32")
        ds = T.alloc_buffer((seq,), "float32")
        red = T.alloc_buffer((4,), "float32")  # 0: Delta, 1: q.k, 2: dO.v, 3: dQ accumulator
        for b in T.serial(batch):
            for h in T.serial(heads):
                for i in T.serial(seq):
                    kvh = h // group
                    red[0] = T.float32(0)
                    for d in T.serial(head_dim):
                        red[0] = red[0] + T.Cast("float32", DO[b, i, h, d]) * T.Cast("float32", O[b, i, h, d])
                    for j in T.serial(i + 1):
                        red[1] = T.float32(0)
                        red[2] = T.float32(0)
                        for d in T.serial(head_dim):
                            red[1] = red[1] + T.Cast("float32", Q[b, i, h, d]) * T.Cast("float32", K[b, j, kvh, d])
                            red[2] = red[2] + T.Cast("float32", DO[b, i, h, d]) * T.Cast("float32", V[b, j, kvh, d])
                        ds[j] = T.exp(red[1] * T.float32(scale) - LSE[b, h, i]) * (red[2] - red[0])
                    for d in T.serial(head_dim):
                        red[3] = T.float32(0)
                        for j in T.serial(i + 1):
                            red[3] = red[3] + ds[j] * T.Cast("float32", K[b, j, kvh, d])
                        DQ[b, i, h, d] = red[3] * T.float32(scale)

    return tvm.compile(tvm.IRModule({"main": attention_bwd_dq}), target="llvm", tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, dout: torch.Tensor,
          lse: torch.Tensor):
    batch, seq, heads, head_dim = q.shape
    kv_heads = k.shape[2]
    if tuple(k.shape) != (batch, seq, kv_heads, head_dim) or v.shape != k.shape:
        raise ValueError("k and v must be (batch, seq, kv_heads, head_dim)")
    if o.shape != q.shape or dout.shape != q.shape:
        raise ValueError("o and dout must be shaped like q")
    if tuple(lse.shape) != (batch, heads, seq):
        raise ValueError("lse must be (batch, heads, seq)")
    if heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    if any(t.dtype != torch.bfloat16 for t in (q, k, v, o, dout)) or lse.dtype != torch.float32:
        raise ValueError("expects bfloat16 q, k, v, o, dout and a float32 lse")
    key = (batch, seq, heads, kv_heads, head_dim)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    q, k, v, o, dout, lse = (t.contiguous() for t in (q, k, v, o, dout, lse))
    dq = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    _compiled[key](q, k, v, o, dout, lse, dq)
    return dq
