"""CPU-target (LLVM) TIRx solution: for every (query i, key j), the same per-output loop the GPU solutions give
one thread: keys past the query's position k_tokens - q_tokens + i score 0; otherwise, for each head, an fp32 dot
product of q[i, h] and k[j], clamped at zero and multiplied by w[i, h], summed over the heads."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(q_tokens: int, k_tokens: int, heads: int, head_dim: int):
    offset = k_tokens - q_tokens

    @T.prim_func
    def indexer_scores(q_ptr: T.handle, k_ptr: T.handle, w_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (q_tokens, heads, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (k_tokens, head_dim), "bfloat16")
        W = T.match_buffer(w_ptr, (q_tokens, heads), "float32")
        O = T.match_buffer(o_ptr, (q_tokens, k_tokens), "float32")
        red = T.alloc_buffer((2,), "float32")  # 0: dot product, 1: score
        for i in T.serial(q_tokens):
            for j in T.serial(k_tokens):
                if j <= offset + i:
                    red[1] = T.float32(0)
                    for h in T.serial(heads):
                        red[0] = T.float32(0)
                        for d in T.serial(head_dim):
                            red[0] = red[0] + T.Cast("float32", Q[i, h, d]) * T.Cast("float32", K[j, d])
                        red[1] = red[1] + W[i, h] * T.max(red[0], T.float32(0))
                    O[i, j] = red[1]
                else:
                    O[i, j] = T.float32(0)

    return tvm.compile(tvm.IRModule({"main": indexer_scores}), target="llvm", tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, k: torch.Tensor, weights: torch.Tensor):
    q_tokens, heads, head_dim = q.shape
    k_tokens = k.shape[0]
    if k.dim() != 2 or k.shape[1] != head_dim:
        raise ValueError("k must be (k_tokens, head_dim)")
    if tuple(weights.shape) != (q_tokens, heads):
        raise ValueError("weights must be (q_tokens, heads)")
    if k_tokens < q_tokens:
        raise ValueError("the key cache must hold at least the query chunk")
    if q.dtype != torch.bfloat16 or k.dtype != torch.bfloat16 or weights.dtype != torch.float32:
        raise ValueError("expects bfloat16 q and k, float32 weights")
    key = (q_tokens, k_tokens, heads, head_dim)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    q = q.contiguous()
    k = k.contiguous()
    weights = weights.contiguous()
    out = torch.empty((q_tokens, k_tokens), dtype=torch.float32, device=q.device)
    _compiled[key](q, k, weights, out)
    return out
