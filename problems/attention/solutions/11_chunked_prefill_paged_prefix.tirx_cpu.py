"""CPU-target (LLVM) TIRx solution: for every (chunk token, query head), a scan of cu_seqlens finds the token's
sequence b, its chunk start and its prefix length P; serial loops then compute the fp32 scaled scores of the P prefix
keys (each looked up through block_tables[b] as page t // page_size, slot t % page_size) followed by the chunk keys
from the chunk start up to the token itself, their max, the softmax denominator and the probability-weighted sum
of the values from the same two sources."""
import math

import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(total: int, q_heads: int, kv_heads: int, head_dim: int, num_pages: int, page_size: int, batch: int,
           max_pages: int):
    group = q_heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim)
    max_prefix = max_pages * page_size

    @T.prim_func
    def chunked_prefill(q_ptr: T.handle, kn_ptr: T.handle, vn_ptr: T.handle, kc_ptr: T.handle, vc_ptr: T.handle,
                        bt_ptr: T.handle, pl_ptr: T.handle, cu_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (total, q_heads, head_dim), "bfloat16")
        KN = T.match_buffer(kn_ptr, (total, kv_heads, head_dim), "bfloat16")
        VN = T.match_buffer(vn_ptr, (total, kv_heads, head_dim), "bfloat16")
        KC = T.match_buffer(kc_ptr, (num_pages, page_size, kv_heads, head_dim), "bfloat16")
        VC = T.match_buffer(vc_ptr, (num_pages, page_size, kv_heads, head_dim), "bfloat16")
        BT = T.match_buffer(bt_ptr, (batch, max_pages), "int32")
        PL = T.match_buffer(pl_ptr, (batch,), "int32")
        CU = T.match_buffer(cu_ptr, (batch + 1,), "int32")
        O = T.match_buffer(o_ptr, (total, q_heads, head_dim), "bfloat16")
        scores = T.alloc_buffer((max_prefix + total,), "float32")
        acc = T.alloc_buffer((head_dim,), "float32")
        red = T.alloc_buffer((3,), "float32")  # 0: dot product, 1: max, 2: sum of exp
        seq = T.alloc_buffer((3,), "int32")  # 0: sequence, 1: chunk start, 2: prefix length
        for t in T.serial(total):
            # the chunk of token t starts at the last cu_seqlens entry <= t
            seq[0] = 0
            seq[1] = 0
            for i in T.serial(batch):
                if CU[i] <= t:
                    seq[0] = i
                    seq[1] = CU[i]
            seq[2] = T.min(PL[seq[0]], max_prefix)
            for h in T.serial(q_heads):
                kvh = h // group
                red[1] = T.float32(-1.0e30)
                for u in T.serial(seq[2]):  # prefix keys, through the block table
                    red[0] = T.float32(0)
                    for d in T.serial(head_dim):
                        red[0] = red[0] + T.Cast("float32", Q[t, h, d]) * T.Cast(
                            "float32", KC[BT[seq[0], u // page_size], u % page_size, kvh, d])
                    scores[u] = red[0] * T.float32(scale)
                    red[1] = T.max(red[1], scores[u])
                for j in T.serial(t + 1 - seq[1]):  # chunk keys, causal
                    red[0] = T.float32(0)
                    for d in T.serial(head_dim):
                        red[0] = red[0] + T.Cast("float32", Q[t, h, d]) * T.Cast("float32", KN[seq[1] + j, kvh, d])
                    scores[seq[2] + j] = red[0] * T.float32(scale)
                    red[1] = T.max(red[1], scores[seq[2] + j])
                red[2] = T.float32(0)
                for d in T.serial(head_dim):
                    acc[d] = T.float32(0)
                for u in T.serial(seq[2]):
                    scores[u] = T.exp(scores[u] - red[1])
                    red[2] = red[2] + scores[u]
                    for d in T.serial(head_dim):
                        acc[d] = acc[d] + scores[u] * T.Cast(
                            "float32", VC[BT[seq[0], u // page_size], u % page_size, kvh, d])
                for j in T.serial(t + 1 - seq[1]):
                    scores[seq[2] + j] = T.exp(scores[seq[2] + j] - red[1])
                    red[2] = red[2] + scores[seq[2] + j]
                    for d in T.serial(head_dim):
                        acc[d] = acc[d] + scores[seq[2] + j] * T.Cast("float32", VN[seq[1] + j, kvh, d])
                for d in T.serial(head_dim):
                    O[t, h, d] = T.Cast("bfloat16", acc[d] / red[2])

    return tvm.compile(tvm.IRModule({"main": chunked_prefill}), target="llvm", tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, k_new: torch.Tensor, v_new: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
          block_tables: torch.Tensor, prefix_lens: torch.Tensor, cu_seqlens: torch.Tensor):
    total, q_heads, head_dim = q.shape
    num_pages, page_size, kv_heads, _ = k_cache.shape
    batch, max_pages = block_tables.shape
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    if tuple(k_new.shape) != (total, kv_heads, head_dim) or v_new.shape != k_new.shape:
        raise ValueError("k_new and v_new must be (total_tokens, kv_heads, head_dim)")
    if v_cache.shape != k_cache.shape or k_cache.shape[3] != head_dim:
        raise ValueError("k_cache and v_cache must be (num_pages, page_size, kv_heads, head_dim)")
    if tuple(prefix_lens.shape) != (batch,) or tuple(cu_seqlens.shape) != (batch + 1,):
        raise ValueError("prefix_lens must be (batch,) and cu_seqlens (batch + 1,)")
    if any(t.dtype != torch.bfloat16 for t in (q, k_new, v_new, k_cache, v_cache)):
        raise ValueError("expects bfloat16 q, k_new, v_new and caches")
    if any(t.dtype != torch.int32 for t in (block_tables, prefix_lens, cu_seqlens)):
        raise ValueError("expects int32 block tables, prefix lengths and cu_seqlens")
    key = (total, q_heads, kv_heads, head_dim, num_pages, page_size, batch, max_pages)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    args = [t.contiguous() for t in (q, k_new, v_new, k_cache, v_cache, block_tables, prefix_lens, cu_seqlens)]
    out = torch.empty_like(args[0])
    _compiled[key](*args, out)
    return out
