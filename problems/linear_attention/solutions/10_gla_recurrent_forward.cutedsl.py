"""GPU (sm_90a) CuTe DSL solution: the gates act on the key side only, so the value columns of the state evolve
independently. One CTA of 64 threads per (value-column block, head, batch); thread j keeps column j of the
(DK, DV) fp32 state in DK registers for the whole sequence. Each step the CTA turns the raw gate logits into
alpha[i] = exp(logsigmoid(g_t[i]) / GATE_NORM) once, split over the threads into shared memory (float64 math),
syncs, then every thread runs one unrolled pass over the key rows: S[i, j] <- alpha[i] S[i, j] + k[i] v[j] and
o_t[j] += (scale q[i]) S[i, j] (q, k warp-uniform broadcasts). The state is written at the end."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

GATE_NORM = 16.0   # gate_logit_normalizer of GLA
COLS = 64          # value columns (threads) per CTA
_compiled = {}


def _make_kernel(dk: int, seqlen: int):
    scale = dk ** -0.5
    gate_iters = (dk + COLS - 1) // COLS

    @cute.kernel
    def gla_kernel(gQ: cute.Tensor, gK: cute.Tensor, gV: cute.Tensor, gG: cute.Tensor, gO: cute.Tensor,
                   gS: cute.Tensor):
        tx, _, _ = cute.arch.thread_idx()
        cb, h, b = cute.arch.block_idx()
        j = cb * COLS + tx
        smem = cutlass.memory.SmemAllocator()
        alpha = smem.allocate_tensor(cutlass.Float32, cute.make_layout(dk))
        col = cute.make_rmem_tensor(dk, cutlass.Float32)
        for i in cutlass.range_constexpr(dk):
            col[i] = cutlass.Float32(0.0)
        for t in range(seqlen):
            cute.arch.sync_threads()            # the previous step's readers of alpha are done
            for it in cutlass.range_constexpr(gate_iters):
                i = it * COLS + tx
                if i < dk:
                    x = gG[b, t, h, i].to(cutlass.Float64)
                    neg = cutlass.Float64(0.0)
                    if x < cutlass.Float64(0.0):
                        neg = x
                    ls = neg - cute.math.log(cutlass.Float64(1.0) + cute.math.exp(neg + neg - x))
                    alpha[i] = cute.math.exp(ls / cutlass.Float64(GATE_NORM)).to(cutlass.Float32)
            cute.arch.sync_threads()
            vj = gV[b, t, h, j].to(cutlass.Float32)
            acc = cutlass.Float32(0.0)
            for i in cutlass.range_constexpr(dk):
                s_new = col[i] * alpha[i] + gK[b, t, h, i].to(cutlass.Float32) * vj
                col[i] = s_new
                acc = acc + (gQ[b, t, h, i].to(cutlass.Float32) * cutlass.Float32(scale)) * s_new
            gO[b, t, h, j] = acc.to(cutlass.BFloat16)
        for i in cutlass.range_constexpr(dk):
            gS[b, h, i, j] = col[i]

    @cute.jit
    def gla(mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mG: cute.Tensor, mO: cute.Tensor, mS: cute.Tensor):
        gla_kernel(mQ, mK, mV, mG, mO, mS).launch(
            grid=(mV.shape[3] // COLS, mQ.shape[2], mQ.shape[0]), block=(COLS, 1, 1))

    return gla


def solve(q, k, v, g):
    batch, seqlen, heads, dk = q.shape
    dv = v.shape[-1]
    if any(t.dtype != torch.bfloat16 for t in (q, k, v, g)):
        raise ValueError("q, k, v and g must be bfloat16")
    if tuple(k.shape) != tuple(q.shape) or tuple(g.shape) != tuple(q.shape) or tuple(v.shape[:3]) != (batch, seqlen, heads):
        raise ValueError("q, k, g must be (BATCH, SEQLEN, NUM_HEADS, HEAD_K_DIM), v (BATCH, SEQLEN, NUM_HEADS, HEAD_V_DIM)")
    if dv % COLS != 0 or dk > 128:
        raise ValueError(f"HEAD_V_DIM={dv} must be a multiple of {COLS} and HEAD_K_DIM={dk} at most 128 (registers)")
    q, k, v, g = (t.contiguous() for t in (q, k, v, g))
    o = torch.empty((batch, seqlen, heads, dv), dtype=v.dtype, device=v.device)
    state = torch.empty((batch, heads, dk, dv), dtype=torch.float32, device=v.device)
    args = [from_dlpack(t) for t in (q, k, v, g, o, state)]
    key = (batch, seqlen, heads, dk, dv)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(dk, seqlen), *args)
    _compiled[key](*args)
    return o, state
