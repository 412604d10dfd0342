"""CuTe DSL (sm_90a) solution, in place: one warp per (token, head) over the q heads followed by the k heads,
4 warps per CTA, grid (tokens, ceil((q_heads + kv_heads) / 4)). Lane l holds the head's elements d = i * 32 + l
(coalesced) in registers, sums their squares in fp32, a warp shuffle sum gives the head's rstd, and the lane
writes x * rstd * weight (q_weight or k_weight, by which tensor the head is in) back in bf16."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

EPS = 1e-6
NUM_WARPS = 4
THREADS = NUM_WARPS * 32
_compiled = {}


def _make_kernel(nq: int, nkv: int, d: int):
    dpl = d // 32
    head_blocks = (nq + nkv + NUM_WARPS - 1) // NUM_WARPS

    @cute.kernel
    def qk_norm_kernel(gQ: cute.Tensor, gK: cute.Tensor, gQW: cute.Tensor, gKW: cute.Tensor, eps: cutlass.Float32):
        tidx, _, _ = cute.arch.thread_idx()
        t, hb, _ = cute.arch.block_idx()
        warp = tidx // 32
        lane = tidx % 32
        h = hb * NUM_WARPS + warp
        xr = cute.make_rmem_tensor(dpl, cutlass.Float32)
        if h < nq:  # warp-uniform branch: a q head
            ss = cutlass.Float32(0.0)
            for i in cutlass.range_constexpr(dpl):
                xr[i] = gQ[t, h, i * 32 + lane].to(cutlass.Float32)
                ss = ss + xr[i] * xr[i]
            rstd = cute.math.rsqrt(cute.arch.warp_reduction_sum(ss) / cutlass.Float32(d) + eps)
            for i in cutlass.range_constexpr(dpl):
                gQ[t, h, i * 32 + lane] = (xr[i] * rstd * gQW[i * 32 + lane].to(cutlass.Float32)).to(gQ.element_type)
        elif h < nq + nkv:  # a k head
            hk = h - nq
            ss = cutlass.Float32(0.0)
            for i in cutlass.range_constexpr(dpl):
                xr[i] = gK[t, hk, i * 32 + lane].to(cutlass.Float32)
                ss = ss + xr[i] * xr[i]
            rstd = cute.math.rsqrt(cute.arch.warp_reduction_sum(ss) / cutlass.Float32(d) + eps)
            for i in cutlass.range_constexpr(dpl):
                gK[t, hk, i * 32 + lane] = (xr[i] * rstd * gKW[i * 32 + lane].to(cutlass.Float32)).to(gK.element_type)

    @cute.jit
    def qk_norm(mQ: cute.Tensor, mK: cute.Tensor, mQW: cute.Tensor, mKW: cute.Tensor, eps: cutlass.Float32):
        qk_norm_kernel(mQ, mK, mQW, mKW, eps).launch(grid=(mQ.shape[0], head_blocks, 1), block=(THREADS, 1, 1))

    return qk_norm


def solve(q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor):
    for t in (q, k, q_weight, k_weight):
        if t.dtype != torch.bfloat16:
            raise ValueError("expects bfloat16 q, k and weights")
    if not (q.is_contiguous() and k.is_contiguous()):
        raise ValueError("q and k must be contiguous: they are normalised in place")
    tokens, nq, d = q.shape
    if k.dim() != 3 or k.shape[0] != tokens or k.shape[2] != d or q_weight.shape != (d,) or k_weight.shape != (d,):
        raise ValueError("q (tokens, q_heads, d), k (tokens, kv_heads, d) and (d,) weights expected")
    if d % 32 != 0:
        raise ValueError(f"HEAD_DIM={d} must be a multiple of 32")
    nkv = k.shape[1]
    args = [from_dlpack(q), from_dlpack(k), from_dlpack(q_weight.contiguous()), from_dlpack(k_weight.contiguous())]
    key = (tokens, nq, nkv, d)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(nq, nkv, d), *args, EPS)
    _compiled[key](*args, EPS)
