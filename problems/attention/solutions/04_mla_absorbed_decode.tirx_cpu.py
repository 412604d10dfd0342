"""CPU-target (LLVM) TIRx solution: for every (sequence, head), serial loops compute the fp32 scaled scores of the
query against the sequence's shared latent + rope keys (all 576 dims), their max, the softmax denominator and the
probability-weighted sum of the 512 latent dims (the value is the key's latent part)."""
import math

import torch
import tvm
from tvm.script import tirx as T

ROPE_DIM = 64  # DeepSeek-V3 qk_rope_head_dim: the trailing key dims that are not part of the value
SCALE = (0.1 * math.log(40.0) + 1.0) ** 2 / math.sqrt(192)  # YaRN mscale^2 / sqrt(qk_nope 128 + qk_rope 64)
_compiled = {}


def _build(batch: int, heads: int, dim: int, max_ctx: int):
    rank = dim - ROPE_DIM

    @T.prim_func
    def mla_absorbed_decode(q_ptr: T.handle, kv_ptr: T.handle, cl_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, heads, dim), "bfloat16")
        KV = T.match_buffer(kv_ptr, (batch, max_ctx, dim), "bfloat16")
        CL = T.match_buffer(cl_ptr, (batch,), "int32")
        O = T.match_buffer(o_ptr, (batch, heads, rank), "bfloat16")
        scores = T.alloc_buffer((max_ctx,), "float32")
        acc = T.alloc_buffer((rank,), "float32")
        red = T.alloc_buffer((3,), "float32")  # 0: dot product, 1: max, 2: sum of exp
        for b in T.serial(batch):
            for h in T.serial(heads):
                ctx = T.min(CL[b], max_ctx)
                red[1] = T.float32(-1.0e30)
                for t in T.serial(ctx):
                    red[0] = T.float32(0)
                    for c in T.serial(dim):
                        red[0] = red[0] + T.Cast("float32", Q[b, h, c]) * T.Cast("float32", KV[b, t, c])
                    scores[t] = red[0] * T.float32(SCALE)
                    red[1] = T.max(red[1], scores[t])
                red[2] = T.float32(0)
                for c in T.serial(rank):
                    acc[c] = T.float32(0)
                for t in T.serial(ctx):
                    scores[t] = T.exp(scores[t] - red[1])
                    red[2] = red[2] + scores[t]
                    for c in T.serial(rank):
                        acc[c] = acc[c] + scores[t] * T.Cast("float32", KV[b, t, c])
                for c in T.serial(rank):
                    O[b, h, c] = T.Cast("bfloat16", acc[c] / red[2])

    return tvm.compile(tvm.IRModule({"main": mla_absorbed_decode}), target="llvm", tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, kv_cache: torch.Tensor, context_lens: torch.Tensor):
    batch, heads, dim = q.shape
    max_ctx = kv_cache.shape[1]
    if dim <= ROPE_DIM or kv_cache.shape != (batch, max_ctx, dim):
        raise ValueError(f"q and kv_cache must share batch and a last dim of latent + {ROPE_DIM} rope dims")
    if q.dtype != torch.bfloat16 or kv_cache.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q and kv_cache")
    if context_lens.dtype != torch.int32:
        raise ValueError("expects int32 context lengths")
    key = (batch, heads, dim, max_ctx)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    q = q.contiguous()
    kv_cache = kv_cache.contiguous()
    context_lens = context_lens.contiguous()
    out = torch.empty(batch, heads, dim - ROPE_DIM, dtype=q.dtype, device=q.device)
    _compiled[key](q, kv_cache, context_lens, out)
    return out
