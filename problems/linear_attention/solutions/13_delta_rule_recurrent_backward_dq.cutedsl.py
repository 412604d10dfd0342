"""GPU (sm_90a) CuTe DSL solution: one CTA per (head, batch), one thread per state column j (HEAD_V_DIM threads),
the column's K entries of the recomputed fp32 state in registers (from h0). Each step thread j forms (S^T k)[j]
over its column (k reads are warp-uniform broadcasts), the correction u = beta (v[j] - (S^T k)[j]) and applies
S[i, j] += k[i] u. dq_t[i] = scale * sum_j S[i, j] do[j] is a reduction across the columns: per row i every warp
sums its 32 partials with shuffles and lane 0 stores the warp's sum in shared memory; after a barrier thread i adds
the warps' sums and writes dq_t[i]. No state is written to memory."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

_compiled = {}


def _make_kernel(seqlen: int, dk: int, dv: int):
    scale = dk ** -0.5
    warps = dv // 32
    out_iters = (dk + dv - 1) // dv

    @cute.kernel
    def dq_kernel(gK: cute.Tensor, gV: cute.Tensor, gB: cute.Tensor, gH0: cute.Tensor, gDO: cute.Tensor,
                  gDQ: cute.Tensor):
        j, _, _ = cute.arch.thread_idx()
        h, b, _ = cute.arch.block_idx()
        warp = j // 32
        lane = j % 32
        smem = cutlass.memory.SmemAllocator()
        part = smem.allocate_tensor(cutlass.Float32, cute.make_layout(warps * dk))
        col = cute.make_rmem_tensor(dk, cutlass.Float32)
        for i in cutlass.range_constexpr(dk):
            col[i] = gH0[b, h, i, j]
        for t in range(seqlen):
            kv = cutlass.Float32(0.0)
            for i in cutlass.range_constexpr(dk):
                kv = kv + col[i] * gK[b, t, h, i].to(cutlass.Float32)
            u = gB[b, t, h].to(cutlass.Float32) * (gV[b, t, h, j].to(cutlass.Float32) - kv)
            doj = gDO[b, t, h, j].to(cutlass.Float32)
            cute.arch.sync_threads()            # the previous step's readers of part are done
            for i in cutlass.range_constexpr(dk):
                col[i] = col[i] + gK[b, t, h, i].to(cutlass.Float32) * u
                ws = cute.arch.warp_reduction_sum(col[i] * doj)
                if lane == 0:
                    part[warp * dk + i] = ws
            cute.arch.sync_threads()
            for it in cutlass.range_constexpr(out_iters):
                i = it * dv + j
                if i < dk:
                    acc = cutlass.Float32(0.0)
                    for w in cutlass.range_constexpr(warps):
                        acc = acc + part[w * dk + i]
                    gDQ[b, t, h, i] = (acc * cutlass.Float32(scale)).to(cutlass.BFloat16)

    @cute.jit
    def delta_bwd_dq(mK: cute.Tensor, mV: cute.Tensor, mB: cute.Tensor, mH0: cute.Tensor, mDO: cute.Tensor,
                     mDQ: cute.Tensor):
        dq_kernel(mK, mV, mB, mH0, mDO, mDQ).launch(grid=(mK.shape[2], mK.shape[0], 1), block=(dv, 1, 1))

    return delta_bwd_dq


def solve(k, v, beta, h0, do):
    batch, seqlen, heads, dk = k.shape
    dv = v.shape[-1]
    if any(t.dtype != torch.bfloat16 for t in (k, v, beta, do)) or h0.dtype != torch.float32:
        raise ValueError("k, v, beta and do must be bfloat16, h0 float32")
    if tuple(v.shape) != (batch, seqlen, heads, dv) or tuple(do.shape) != tuple(v.shape):
        raise ValueError("v and do must be (BATCH, SEQLEN, NUM_HEADS, HEAD_V_DIM)")
    if tuple(beta.shape) != (batch, seqlen, heads) or tuple(h0.shape) != (batch, heads, dk, dv):
        raise ValueError("beta must be (BATCH, SEQLEN, NUM_HEADS) and h0 (BATCH, NUM_HEADS, K, V)")
    if dv % 32 != 0 or dv > 1024 or dk > 128:
        raise ValueError("HEAD_V_DIM must be a multiple of 32 (<= 1024, one thread per column), HEAD_K_DIM <= 128")
    ins = [t.contiguous() for t in (k, v, beta, h0, do)]
    dq = torch.empty((batch, seqlen, heads, dk), dtype=k.dtype, device=k.device)
    args = [from_dlpack(t) for t in (*ins, dq)]
    key = (batch, seqlen, heads, dk, dv)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(seqlen, dk, dv), *args)
    _compiled[key](*args)
    return dq
