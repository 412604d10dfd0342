"""GPU (sm_90a) CuTe DSL solution: one CTA of HEAD_DIM threads per (head, batch) walks the chunks in order; thread
j keeps column j of the running state S (HEAD_DIM x HEAD_DIM, float32) in registers. Per chunk: the threads split
the causal CHUNK x CHUNK scores P[t, s] = (s q_t) . k_s (s <= t, 0 above) into shared memory; then thread j writes
o_t[j] = sum_{s <= t} P[t, s] v_s[j] + sum_i (s q_t[i]) S[i, j] (intra plus inter-chunk, q reads warp-uniform) for
every t, and finally adds the chunk's sum_s k_s[i] v_s[j] to its state column. The state is written at the end."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

_compiled = {}


def _make_kernel(seqlen: int, dim: int, chunk: int):
    nchunks = seqlen // chunk
    scale = dim ** -0.5
    score_iters = (chunk * chunk + dim - 1) // dim

    @cute.kernel
    def chunk_kernel(gQ: cute.Tensor, gK: cute.Tensor, gV: cute.Tensor, gO: cute.Tensor, gS: cute.Tensor):
        j, _, _ = cute.arch.thread_idx()
        h, b, _ = cute.arch.block_idx()
        smem = cutlass.memory.SmemAllocator()
        P = smem.allocate_tensor(cutlass.Float32, cute.make_layout(chunk * chunk))
        st = cute.make_rmem_tensor(dim, cutlass.Float32)
        for i in cutlass.range_constexpr(dim):
            st[i] = cutlass.Float32(0.0)
        for c in range(nchunks):
            base = c * chunk
            cute.arch.sync_threads()            # the previous chunk's readers of P are done
            for it in range(score_iters):
                e = it * dim + j
                if e < chunk * chunk:
                    t = e // chunk
                    s = e % chunk
                    dot = cutlass.Float32(0.0)
                    if s <= t:
                        for i in range(dim):
                            dot = dot + (gQ[b, h, base + t, i].to(cutlass.Float32) * cutlass.Float32(scale)) \
                                * gK[b, h, base + s, i].to(cutlass.Float32)
                    P[e] = dot
            cute.arch.sync_threads()
            for t in range(chunk):
                intra = cutlass.Float32(0.0)
                for s in range(t + 1):
                    intra = intra + P[t * chunk + s] * gV[b, h, base + s, j].to(cutlass.Float32)
                inter = cutlass.Float32(0.0)
                for i in cutlass.range_constexpr(dim):
                    inter = inter + (gQ[b, h, base + t, i].to(cutlass.Float32) * cutlass.Float32(scale)) * st[i]
                gO[b, h, base + t, j] = (intra + inter).to(cutlass.BFloat16)
            for i in cutlass.range_constexpr(dim):
                kv = cutlass.Float32(0.0)
                for s in range(chunk):
                    kv = kv + gK[b, h, base + s, i].to(cutlass.Float32) * gV[b, h, base + s, j].to(cutlass.Float32)
                st[i] = st[i] + kv
        for i in cutlass.range_constexpr(dim):
            gS[b, h, i, j] = st[i]

    @cute.jit
    def linear_attn_chunk(mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mO: cute.Tensor, mS: cute.Tensor):
        chunk_kernel(mQ, mK, mV, mO, mS).launch(grid=(mQ.shape[1], mQ.shape[0], 1), block=(dim, 1, 1))

    return linear_attn_chunk


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
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    out = torch.empty((batch, heads, seqlen, dim), dtype=torch.bfloat16, device=q.device)
    state = torch.empty((batch, heads, dim, dim), dtype=torch.float32, device=q.device)
    args = [from_dlpack(t) for t in (q, k, v, out, state)]
    key = (batch, heads, seqlen, dim, chunk)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(seqlen, dim, chunk), *args)
    _compiled[key](*args)
    return out, state
