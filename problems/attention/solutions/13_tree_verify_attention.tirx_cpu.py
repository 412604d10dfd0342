"""CPU-target (LLVM) TIRx solution: for every (sequence, draft token i), a walk up the parent pointers from i to the
root lists i's ancestors-or-self; then for every query head, serial loops compute the fp32 scaled scores of the
valid cache rows followed by the listed draft tokens' keys, their max, the softmax denominator and the
probability-weighted sum of the values from the same two sources."""
import math

import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(batch: int, tree: int, q_heads: int, kv_heads: int, head_dim: int, max_ctx: int):
    group = q_heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim)

    @T.prim_func
    def tree_verify(q_ptr: T.handle, kc_ptr: T.handle, vc_ptr: T.handle, cl_ptr: T.handle, kt_ptr: T.handle,
                    vt_ptr: T.handle, par_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, tree, q_heads, head_dim), "bfloat16")
        KC = T.match_buffer(kc_ptr, (batch, max_ctx, kv_heads, head_dim), "bfloat16")
        VC = T.match_buffer(vc_ptr, (batch, max_ctx, kv_heads, head_dim), "bfloat16")
        CL = T.match_buffer(cl_ptr, (batch,), "int32")
        KT = T.match_buffer(kt_ptr, (batch, tree, kv_heads, head_dim), "bfloat16")
        VT = T.match_buffer(vt_ptr, (batch, tree, kv_heads, head_dim), "bfloat16")
        PAR = T.match_buffer(par_ptr, (batch, tree), "int32")
        O = T.match_buffer(o_ptr, (batch, tree, q_heads, head_dim), "bfloat16")
        scores = T.alloc_buffer((max_ctx + tree,), "float32")
        acc = T.alloc_buffer((head_dim,), "float32")
        red = T.alloc_buffer((3,), "float32")  # 0: dot product, 1: max, 2: sum of exp
        anc = T.alloc_buffer((tree,), "int32")  # ancestor-or-self list of the current draft token
        walk = T.alloc_buffer((3,), "int32")  # 0: current node, 1: list length, 2: valid context rows
        for b in T.serial(batch):
            for i in T.serial(tree):
                # walk from i to the root (at most tree steps; an out-of-range pointer ends the walk)
                walk[0] = i
                walk[1] = 0
                for step in T.serial(tree):  # noqa: B007 - a bounded walk: the count is unused
                    if walk[0] >= 0 and walk[0] < tree:
                        anc[walk[1]] = walk[0]
                        walk[1] = walk[1] + 1
                        walk[0] = PAR[b, walk[0]]
                    else:
                        walk[0] = -1
                walk[2] = T.min(CL[b], max_ctx)
                for h in T.serial(q_heads):
                    kvh = h // group
                    red[1] = T.float32(-1.0e30)
                    for u in T.serial(walk[2]):  # the cache rows
                        red[0] = T.float32(0)
                        for d in T.serial(head_dim):
                            red[0] = red[0] + T.Cast("float32", Q[b, i, h, d]) * T.Cast("float32", KC[b, u, kvh, d])
                        scores[u] = red[0] * T.float32(scale)
                        red[1] = T.max(red[1], scores[u])
                    for n in T.serial(walk[1]):  # the ancestors-or-self
                        red[0] = T.float32(0)
                        for d in T.serial(head_dim):
                            red[0] = red[0] + T.Cast("float32", Q[b, i, h, d]) * T.Cast(
                                "float32", KT[b, anc[n], kvh, d])
                        scores[walk[2] + n] = red[0] * T.float32(scale)
                        red[1] = T.max(red[1], scores[walk[2] + n])
                    red[2] = T.float32(0)
                    for d in T.serial(head_dim):
                        acc[d] = T.float32(0)
                    for u in T.serial(walk[2]):
                        scores[u] = T.exp(scores[u] - red[1])
                        red[2] = red[2] + scores[u]
                        for d in T.serial(head_dim):
                            acc[d] = acc[d] + scores[u] * T.Cast("float32", VC[b, u, kvh, d])
                    for n in T.serial(walk[1]):
                        scores[walk[2] + n] = T.exp(scores[walk[2] + n] - red[1])
                        red[2] = red[2] + scores[walk[2] + n]
                        for d in T.serial(head_dim):
                            acc[d] = acc[d] + scores[walk[2] + n] * T.Cast("float32", VT[b, anc[n], kvh, d])
                    for d in T.serial(head_dim):
                        O[b, i, h, d] = T.Cast("bfloat16", acc[d] / red[2])

    return tvm.compile(tvm.IRModule({"main": tree_verify}), target="llvm", tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, context_lens: torch.Tensor,
          k_tree: torch.Tensor, v_tree: torch.Tensor, parents: torch.Tensor):
    batch, tree, q_heads, head_dim = q.shape
    max_ctx, kv_heads = k_cache.shape[1], k_cache.shape[2]
    if q_heads % kv_heads != 0:
        raise ValueError("query heads must be a multiple of KV heads")
    if tuple(k_cache.shape) != (batch, max_ctx, kv_heads, head_dim) or v_cache.shape != k_cache.shape:
        raise ValueError("k_cache and v_cache must be (batch, max_context, kv_heads, head_dim)")
    if tuple(k_tree.shape) != (batch, tree, kv_heads, head_dim) or v_tree.shape != k_tree.shape:
        raise ValueError("k_tree and v_tree must be (batch, tree, kv_heads, head_dim)")
    if tuple(context_lens.shape) != (batch,) or tuple(parents.shape) != (batch, tree):
        raise ValueError("context_lens must be (batch,) and parents (batch, tree)")
    if any(t.dtype != torch.bfloat16 for t in (q, k_cache, v_cache, k_tree, v_tree)):
        raise ValueError("expects bfloat16 q, caches and draft keys / values")
    if context_lens.dtype != torch.int32 or parents.dtype != torch.int32:
        raise ValueError("expects int32 context lengths and parents")
    key = (batch, tree, q_heads, kv_heads, head_dim, max_ctx)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    args = [t.contiguous() for t in (q, k_cache, v_cache, context_lens, k_tree, v_tree, parents)]
    out = torch.empty_like(args[0])
    _compiled[key](*args, out)
    return out
