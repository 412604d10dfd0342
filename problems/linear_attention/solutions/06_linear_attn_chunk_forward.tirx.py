"""GPU (sm_90a) TIRx solution: one CTA of HEAD_DIM threads per (head, batch) walks the chunks in order; thread j
keeps column j of the running state S (HEAD_DIM x HEAD_DIM, float32) in registers. Per chunk: the threads split
the causal CHUNK x CHUNK scores P[t, s] = (s q_t) . k_s (s <= t, 0 above) into shared memory; then thread j writes
o_t[j] = sum_{s <= t} P[t, s] v_s[j] + sum_i (s q_t[i]) S[i, j] (intra plus inter-chunk, q reads warp-uniform) for
every t, and finally adds the chunk's sum_s k_s[i] v_s[j] to its state column. The state is written at the end."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(batch: int, heads: int, seqlen: int, dim: int, chunk: int):
    nchunks = seqlen // chunk
    scale = dim ** -0.5
    score_iters = (chunk * chunk + dim - 1) // dim

    @T.prim_func
    def linear_attn_chunk(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, o_ptr: T.handle, s_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, heads, seqlen, dim), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, heads, seqlen, dim), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, heads, seqlen, dim), "bfloat16")
        O = T.match_buffer(o_ptr, (batch, heads, seqlen, dim), "bfloat16")
        S = T.match_buffer(s_ptr, (batch, heads, dim, dim), "float32")
        T.device_entry()
        h, b = T.cta_id([heads, batch])
        j = T.thread_id([dim])
        P = T.alloc_shared((chunk * chunk,), "float32")
        st = T.alloc_local((dim,), "float32")
        acc = T.alloc_local((2,), "float32")  # 0: intra-chunk sum / score, 1: inter-chunk sum
        for i in T.unroll(dim):
            st[i] = T.float32(0)
        for c in T.serial(nchunks):
            base = c * chunk
            T.cuda.cta_sync()                   # the previous chunk's readers of P are done
            for it in T.serial(score_iters):
                e = it * dim + j
                if e < chunk * chunk:
                    acc[0] = T.float32(0)
                    if e % chunk <= e // chunk:
                        for i in T.serial(dim):
                            acc[0] = acc[0] + (T.Cast("float32", Q[b, h, base + e // chunk, i]) * T.float32(scale)) \
                                * T.Cast("float32", K[b, h, base + e % chunk, i])
                    P[e] = acc[0]
            T.cuda.cta_sync()
            for t in T.serial(chunk):
                acc[0] = T.float32(0)
                for s in T.serial(t + 1):
                    acc[0] = acc[0] + P[t * chunk + s] * T.Cast("float32", V[b, h, base + s, j])
                acc[1] = T.float32(0)
                for i in T.unroll(dim):
                    acc[1] = acc[1] + (T.Cast("float32", Q[b, h, base + t, i]) * T.float32(scale)) * st[i]
                O[b, h, base + t, j] = T.Cast("bfloat16", acc[0] + acc[1])
            for i in T.unroll(dim):
                acc[0] = T.float32(0)
                for s in T.serial(chunk):
                    acc[0] = acc[0] + T.Cast("float32", K[b, h, base + s, i]) * T.Cast("float32", V[b, h, base + s, j])
                st[i] = st[i] + acc[0]
        for i in T.unroll(dim):
            S[b, h, i, j] = st[i]

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    module = tvm.IRModule({"main": linear_attn_chunk})
    return tvm.compile(module, target=target, tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    batch, heads, seqlen, dim = q.shape
    if q.dtype != torch.bfloat16 or k.dtype != torch.bfloat16 or v.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q, k, v")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError("q, k and v must all be (BATCH, NUM_HEADS, SEQLEN, HEAD_DIM)")
    if dim % 32 != 0 or dim > 256:
        raise ValueError(f"HEAD_DIM={dim} must be a multiple of 32 and at most 256 (one thread per state column)")
    chunk = min(64, seqlen)
    while seqlen % chunk != 0:
        chunk //= 2
    key = (batch, heads, seqlen, dim, chunk)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    out = torch.empty((batch, heads, seqlen, dim), dtype=torch.bfloat16, device=q.device)
    state = torch.empty((batch, heads, dim, dim), dtype=torch.float32, device=q.device)
    _compiled[key](q.contiguous(), k.contiguous(), v.contiguous(), out, state)
    return out, state
