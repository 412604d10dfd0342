"""TIRx (sm_90a) solution: one CTA of 128 threads per (query i, block of 128 keys), one thread per output, running
the CPU solution's per-output loop. The CTA first stages q[i] (all heads, as fp32) and w[i] in shared memory; then
thread j, if key j is at or before the query's position k_tokens - q_tokens + i, sums over the heads
w[i, h] * relu(q[i, h] . k[j]) with fp32 dot products (q read as shared-memory broadcasts), else writes 0."""
import torch
import tvm
from tvm.script import tirx as T

THREADS = 128  # keys per CTA
SMEM_LIMIT = 48 * 1024  # static shared memory per CTA
_compiled = {}


def _build(q_tokens: int, k_tokens: int, heads: int, head_dim: int):
    offset = k_tokens - q_tokens
    k_blocks = (k_tokens + THREADS - 1) // THREADS
    qsize = heads * head_dim

    @T.prim_func
    def indexer_scores(q_ptr: T.handle, k_ptr: T.handle, w_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (q_tokens, heads, head_dim), "bfloat16")
        K = T.match_buffer(k_ptr, (k_tokens, head_dim), "bfloat16")
        W = T.match_buffer(w_ptr, (q_tokens, heads), "float32")
        O = T.match_buffer(o_ptr, (q_tokens, k_tokens), "float32")
        T.device_entry()
        kb, i = T.cta_id([k_blocks, q_tokens])
        tx = T.thread_id([THREADS])
        s_q = T.alloc_shared((qsize,), "float32")
        s_w = T.alloc_shared((heads,), "float32")
        dot = T.alloc_local((1,), "float32")
        score = T.alloc_local((1,), "float32")
        for e in T.serial((qsize - tx + (THREADS - 1)) // THREADS):
            s_q[tx + THREADS * e] = T.Cast("float32", Q[i, (tx + THREADS * e) // head_dim,
                                                         (tx + THREADS * e) % head_dim])
        for e in T.serial((heads - tx + (THREADS - 1)) // THREADS):
            s_w[tx + THREADS * e] = W[i, tx + THREADS * e]
        T.cuda.cta_sync()
        j = kb * THREADS + tx
        if j < k_tokens:
            if j <= offset + i:
                score[0] = T.float32(0)
                for h in T.serial(heads):
                    dot[0] = T.float32(0)
                    for d in T.serial(head_dim):
                        dot[0] = dot[0] + s_q[h * head_dim + d] * T.Cast("float32", K[j, d])
                    score[0] = score[0] + s_w[h] * T.max(dot[0], T.float32(0))
                O[i, j] = score[0]
            else:
                O[i, j] = T.float32(0)

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": indexer_scores}), target=target, tir_pipeline="tirx")


def solve(q: torch.Tensor, k: torch.Tensor, weights: torch.Tensor):
    q_tokens, heads, head_dim = q.shape
    k_tokens = k.shape[0]
    if k.dim() != 2 or k.shape[1] != head_dim:
        raise ValueError("k must be (k_tokens, head_dim)")
    if tuple(weights.shape) != (q_tokens, heads):
        raise ValueError("weights must be (q_tokens, heads)")
    if k_tokens < q_tokens:
        raise ValueError("the key cache must hold at least the query chunk")
    if q_tokens > 65535:
        raise ValueError("too many query tokens for grid.y")
    if 4 * (heads * head_dim + heads) > SMEM_LIMIT:
        raise ValueError(f"q of {heads} x {head_dim} (fp32) does not fit in {SMEM_LIMIT} bytes of shared memory")
    if q.dtype != torch.bfloat16 or k.dtype != torch.bfloat16 or weights.dtype != torch.float32:
        raise ValueError("expects bfloat16 q and k, float32 weights")
    if q_tokens * k_tokens >= 2**31:
        raise ValueError("score matrix too large for 32-bit indexing")
    key = (q_tokens, k_tokens, heads, head_dim)
    if key not in _compiled:
        _compiled[key] = _build(*key)["main"]
    q = q.contiguous()
    k = k.contiguous()
    weights = weights.contiguous()
    out = torch.empty((q_tokens, k_tokens), dtype=torch.float32, device=q.device)
    _compiled[key](q, k, weights, out)
    return out
