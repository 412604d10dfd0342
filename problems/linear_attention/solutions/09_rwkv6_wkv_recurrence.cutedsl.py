"""GPU (sm_90a) CuTe DSL solution: one CTA per (head, batch), one thread per value column j (HEAD_SIZE threads).
The decay diag(exp(w_t)) acts on the key side only, so the V state columns evolve independently: thread j keeps
column j of the (K, V) fp32 state in K registers for the whole sequence. Each step it reads v_t[j] (coalesced) and
the warp-uniform broadcasts r_t, k_t, w_t, u, accumulates the bonus readout o_t[j] = sum_i r[i] * (S[i, j] +
u[i] k[i] v[j]) and updates S[i, j] <- S[i, j] exp(w[i]) + k[i] v[j] in the same unrolled pass over i; no
synchronisation. exp is evaluated in float64. The column is written at the end."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

_compiled = {}


def _make_kernel(dk: int, seqlen: int):
    @cute.kernel
    def wkv6_kernel(gR: cute.Tensor, gK: cute.Tensor, gV: cute.Tensor, gW: cute.Tensor, gU: cute.Tensor,
                    gS0: cute.Tensor, gO: cute.Tensor, gS: cute.Tensor):
        j, _, _ = cute.arch.thread_idx()
        h, b, _ = cute.arch.block_idx()
        col = cute.make_rmem_tensor(dk, cutlass.Float32)
        for i in cutlass.range_constexpr(dk):
            col[i] = gS0[b, h, i, j]
        for t in range(seqlen):
            vj = gV[b, t, h, j].to(cutlass.Float32)
            acc = cutlass.Float32(0.0)
            for i in cutlass.range_constexpr(dk):
                kv = gK[b, t, h, i].to(cutlass.Float32) * vj
                s_old = col[i]
                acc = acc + gR[b, t, h, i].to(cutlass.Float32) * (s_old + gU[h, i].to(cutlass.Float32) * kv)
                decay = cute.math.exp(gW[b, t, h, i].to(cutlass.Float64)).to(cutlass.Float32)
                col[i] = s_old * decay + kv
            gO[b, t, h, j] = acc.to(cutlass.BFloat16)
        for i in cutlass.range_constexpr(dk):
            gS[b, h, i, j] = col[i]

    @cute.jit
    def wkv6(mR: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mW: cute.Tensor, mU: cute.Tensor,
             mS0: cute.Tensor, mO: cute.Tensor, mS: cute.Tensor):
        wkv6_kernel(mR, mK, mV, mW, mU, mS0, mO, mS).launch(
            grid=(mR.shape[2], mR.shape[0], 1), block=(mV.shape[3], 1, 1))

    return wkv6


def solve(r, k, v, w, u, state0):
    batch, seqlen, heads, dk = r.shape
    dv = v.shape[-1]
    if r.dtype != torch.bfloat16 or k.dtype != torch.bfloat16 or v.dtype != torch.bfloat16:
        raise ValueError("r, k, v must be bfloat16")
    if w.dtype != torch.float32 or state0.dtype != torch.float32 or u.dtype != torch.bfloat16:
        raise ValueError("w and state0 must be float32, u bfloat16")
    if tuple(k.shape) != (batch, seqlen, heads, dk) or tuple(w.shape) != (batch, seqlen, heads, dk):
        raise ValueError("k and w must have r's shape (BATCH, SEQLEN, NUM_HEADS, HEAD_SIZE)")
    if tuple(u.shape) != (heads, dk) or tuple(state0.shape) != (batch, heads, dk, dv):
        raise ValueError("u must be (NUM_HEADS, K) and state0 (BATCH, NUM_HEADS, K, V)")
    if dv % 32 != 0 or dv > 1024 or dk > 128:
        raise ValueError("V must be a multiple of 32 (<= 1024, one thread per column) and K <= 128 (registers)")
    r, k, v, w, u, state0 = (t.contiguous() for t in (r, k, v, w, u, state0))
    o = torch.empty((batch, seqlen, heads, dv), dtype=v.dtype, device=v.device)
    state = torch.empty((batch, heads, dk, dv), dtype=torch.float32, device=v.device)
    args = [from_dlpack(t) for t in (r, k, v, w, u, state0, o, state)]
    key = (batch, seqlen, heads, dk, dv)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(dk, seqlen), *args)
    _compiled[key](*args)
    return o, state
