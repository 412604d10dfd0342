"""CPU-target (LLVM) TIRx solution: per (batch, head), the running state S (HEAD_DIM x HEAD_DIM, float32) lives in
the returned state buffer, zeroed first. For each chunk: the causal scores P[t, s] = (s q_t) . k_s (s <= t) into a
CHUNK x CHUNK buffer, then o_t = sum_{s <= t} P[t, s] v_s + (s q_t) S (intra-chunk plus inter-chunk), rounded to
bf16, then the chunk's k^T v (summed over the chunk first) is added to S."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(batch: int, heads: int, seqlen: int, dim: int, chunk: int):
    nchunks = seqlen // chunk
    scale = dim ** -0.5

    @T.prim_func
    def linear_attn_chunk(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, o_ptr: T.handle, s_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, heads, seqlen, dim), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, heads, seqlen, dim), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, heads, seqlen, dim), "bfloat16")
        O = T.match_buffer(o_ptr, (batch, heads, seqlen, dim), "bfloat16")
        S = T.match_buffer(s_ptr, (batch, heads, dim, dim), "float32")
        P = T.alloc_buffer((chunk, chunk), "float32")
        acc = T.alloc_buffer((2,), "float32")  # 0: intra-chunk sum, 1: inter-chunk sum
        for b in T.serial(batch):
            for h in T.serial(heads):
                for i in T.serial(dim):
                    for j in T.serial(dim):
                        S[b, h, i, j] = T.float32(0)
                for c in T.serial(nchunks):
                    for t in T.serial(chunk):
                        for s in T.serial(t + 1):
                            P[t, s] = T.float32(0)
                            for i in T.serial(dim):
                                P[t, s] = P[t, s] + (T.Cast("float32", Q[b, h, c * chunk + t, i]) * T.float32(scale)) \
                                    * T.Cast("float32", K[b, h, c * chunk + s, i])
                    for t in T.serial(chunk):
                        for j in T.serial(dim):
                            acc[0] = T.float32(0)
                            for s in T.serial(t + 1):
                                acc[0] = acc[0] + P[t, s] * T.Cast("float32", V[b, h, c * chunk + s, j])
                            acc[1] = T.float32(0)
                            for i in T.serial(dim):
                                acc[1] = acc[1] + (T.Cast("float32", Q[b, h, c * chunk + t, i]) * T.float32(scale)) \
                                    * S[b, h, i, j]
                            O[b, h, c * chunk + t, j] = T.Cast("bfloat16", acc[0] + acc[1])
                    for i in T.serial(dim):
                        for j in T.serial(dim):
                            acc[0] = T.float32(0)
                            for s in T.serial(chunk):
                                acc[0] = acc[0] + T.Cast("float32", K[b, h, c * chunk + s, i]) \
                                    * T.Cast("float32", V[b, h, c * chunk + s, j])
                            S[b, h, i, j] = S[b, h, i, j] + acc[0]

    module = tvm.IRModule({"main": linear_attn_chunk})
    return tvm.compile(module, target="llvm", tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    batch, heads, seqlen, dim = q.shape
    if q.dtype != torch.bfloat16 or k.dtype != torch.bfloat16 or v.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q, k, v")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError("q, k and v must all be (BATCH, NUM_HEADS, SEQLEN, HEAD_DIM)")
    chunk = min(64, seqlen)
    while seqlen % chunk != 0:
        chunk //= 2
    key = (batch, heads, seqlen, dim, chunk)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    out = torch.empty((batch, heads, seqlen, dim), dtype=torch.bfloat16)
    state = torch.empty((batch, heads, dim, dim), dtype=torch.float32)
    _compiled[key](q.contiguous(), k.contiguous(), v.contiguous(), out, state)
    return out, state
