"""GPU (sm_90a) CuTe DSL solution: one CTA per token with EXPERTS threads, thread e owns grad[t, e]. The renormalised
top-k weights are the softmax of the TOPK selected logits alone, so a thread whose expert is not among topk_ids[t]
writes exactly 0; the thread of the k-th selected expert reads the TOPK selected logits and upstream gradients and
writes w_k * (dw_k - sum_j w_j dw_j), w = softmax of the selected logits, computed in float64 and rounded once to
float32."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

_compiled = {}


@cute.kernel
def _router_bwd_kernel(mX: cute.Tensor, mID: cute.Tensor, mDW: cute.Tensor, mG: cute.Tensor,
                       topk: cutlass.Constexpr):
    e, _, _ = cute.arch.thread_idx()
    t, _, _ = cute.arch.block_idx()
    ex = cutlass.Int32(e)
    sel = cutlass.Int32(-1)
    for k in cutlass.range_constexpr(topk):
        if cutlass.Int32(mID[t, k]) == ex:
            sel = cutlass.Int32(k)
    if sel < 0:
        mG[t, ex] = cutlass.Float32(0.0)
    else:
        m32 = mX[t, mID[t, 0]]                   # the max of fp32 logits is exact in fp32
        for k in cutlass.range_constexpr(1, topk):
            m32 = cute.arch.fmax(m32, mX[t, mID[t, k]])
        m = m32.to(cutlass.Float64)
        s = cutlass.Float64(0.0)
        sd = cutlass.Float64(0.0)
        for k in cutlass.range_constexpr(topk):
            p = cute.math.exp(mX[t, mID[t, k]].to(cutlass.Float64) - m)
            s = s + p
            sd = sd + p * mDW[t, k].to(cutlass.Float64)
        w = cute.math.exp(mX[t, ex].to(cutlass.Float64) - m) / s
        mG[t, ex] = (w * (mDW[t, sel].to(cutlass.Float64) - sd / s)).to(cutlass.Float32)


@cute.jit
def _router_bwd(mX: cute.Tensor, mID: cute.Tensor, mDW: cute.Tensor, mG: cute.Tensor, tokens: cutlass.Constexpr,
                experts: cutlass.Constexpr, topk: cutlass.Constexpr):
    _router_bwd_kernel(mX, mID, mDW, mG, topk).launch(grid=(tokens, 1, 1), block=(experts, 1, 1))


def solve(router_logits, topk_ids, grad_weights):
    tokens, experts = router_logits.shape
    if router_logits.dtype != torch.float32 or grad_weights.dtype != torch.float32:
        raise ValueError("router_logits and grad_weights must be float32")
    if topk_ids.dtype != torch.int32 or topk_ids.dim() != 2 or topk_ids.shape[0] != tokens:
        raise ValueError("topk_ids must be int32 (TOKENS, TOPK)")
    if grad_weights.shape != topk_ids.shape or experts > 1024:
        raise ValueError("grad_weights must be (TOKENS, TOPK), EXPERTS at most 1024 (one thread per expert)")
    for x in (router_logits, topk_ids, grad_weights):
        if not x.is_contiguous():
            raise ValueError("all tensors must be contiguous")
    grad_logits = torch.empty(tokens, experts, dtype=torch.float32, device=router_logits.device)
    args = [from_dlpack(x) for x in (router_logits, topk_ids, grad_weights, grad_logits)]
    key = (tokens, experts, topk_ids.shape[1])
    if key not in _compiled:
        _compiled[key] = cute.compile(_router_bwd, *args, tokens, experts, topk_ids.shape[1])
    _compiled[key](*args)
    return grad_logits
