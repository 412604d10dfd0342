"""CPU-target (LLVM) TIRx solution: for every (sequence, KV head, key row j), the same two passes the GPU solutions
spread over threads, repeated for each query head h of the KV head's group: (1) for each query i >= j, the fp32
probability p_i = exp(scale * q_i . k_j - lse_i) recomputed from the saved log-sum-exp and
ds_i = p_i * (dO_i . v_j - Delta_i) into two rows; (2) for each element d, dV[j, d] += sum_i p_i * dO[i, d] and
dK[j, d] += sum_i ds_i * q[i, d] in fp32 accumulators that span the group, written once (dK times scale)."""
import math

import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(batch: int, seq: int, heads: int, kv_heads: int, head_dim: int):
    group = heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def attention_bwd_dkdv(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, do_ptr: T.handle, lse_ptr: T.handle,
                           delta_ptr: T.handle, dk_ptr: T.handle, dv_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, seq, heads, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, seq, kv_heads, head_dim), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, seq, kv_heads, head_dim), "bfloat16")
        DO = T.match_buffer(do_ptr, (batch, seq, heads, head_dim), "bfloat16")
        LSE = T.match_buffer(lse_ptr, (batch, heads, seq), "float32")
        DELTA = T.match_buffer(delta_ptr, (batch, heads, seq), "float32")
        DK = T.match_buffer(dk_ptr, (batch, seq, kv_heads, head_dim), "float32")
        DV = T.match_buffer(dv_ptr, (batch, seq, kv_heads, head_dim), "float32")
        p_row = T.alloc_buffer((seq,), "float32")
        ds_row = T.alloc_buffer((seq,), "float32")
        acc_dk = T.alloc_buffer((head_dim,), "float32")
        acc_dv = T.alloc_buffer((head_dim,), "float32")
        red = T.alloc_buffer((2,), "float32")  # 0: q.k, 1: dO.v
        for b in T.serial(batch):
            for g in T.serial(kv_heads):
                for j in T.serial(seq):
                    for d in T.serial(head_dim):
                        acc_dk[d] = T.float32(0)
                        acc_dv[d] = T.float32(0)
                    for hh in T.serial(group):
                        h = g * group + hh
                        # pass 1: p and ds for the queries i = j + n that see key j
                        for n in T.serial(seq - j):
                            red[0] = T.float32(0)
                            red[1] = T.float32(0)
                            for d in T.serial(head_dim):
                                red[0] = red[0] + T.Cast("float32", Q[b, j + n, h, d]) * T.Cast(
                                    "float32", K[b, j, g, d])
                                red[1] = red[1] + T.Cast("float32", DO[b, j + n, h, d]) * T.Cast(
                                    "float32", V[b, j, g, d])
                            p_row[n] = T.exp(red[0] * T.float32(scale) - LSE[b, h, j + n])
                            ds_row[n] = p_row[n] * (red[1] - DELTA[b, h, j + n])
                        # pass 2: accumulate over those queries
                        for d in T.serial(head_dim):
                            for n in T.serial(seq - j):
                                acc_dv[d] = acc_dv[d] + p_row[n] * T.Cast("float32", DO[b, j + n, h, d])
                                acc_dk[d] = acc_dk[d] + ds_row[n] * T.Cast("float32", Q[b, j + n, h, d])
                    for d in T.serial(head_dim):
                        DK[b, j, g, d] = acc_dk[d] * T.float32(scale)
                        DV[b, j, g, d] = acc_dv[d]

    return tvm.compile(tvm.IRModule({"main": attention_bwd_dkdv}), target="llvm", tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dout: torch.Tensor, lse: torch.Tensor,
          delta: torch.Tensor):
    batch, seq, heads, head_dim = q.shape
    kv_heads = k.shape[2]
    if tuple(k.shape) != (batch, seq, kv_heads, head_dim) or v.shape != k.shape:
        raise ValueError("k and v must be (batch, seq, kv_heads, head_dim)")
    if dout.shape != q.shape:
        raise ValueError("dout must be shaped like q")
    if tuple(lse.shape) != (batch, heads, seq) or delta.shape != lse.shape:
        raise ValueError("lse and delta must be (batch, heads, seq)")
    if heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    if any(t.dtype != torch.bfloat16 for t in (q, k, v, dout)):
        raise ValueError("expects bfloat16 q, k, v and dout")
    if lse.dtype != torch.float32 or delta.dtype != torch.float32:
        raise ValueError("expects float32 lse and delta")
    key = (batch, seq, heads, kv_heads, head_dim)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    q, k, v, dout, lse, delta = (t.contiguous() for t in (q, k, v, dout, lse, delta))
    dk = torch.empty(k.shape, dtype=torch.float32, device=k.device)
    dv = torch.empty(v.shape, dtype=torch.float32, device=v.device)
    _compiled[key](q, k, v, dout, lse, delta, dk, dv)
    return dk, dv
