"""GPU (sm_90a) CuTe DSL solution: one warp-sized CTA per token; lane l keeps experts l, l+32, ... in a register
tensor. Warp max / sum give the softmax; each of the TOPK passes takes a warp max of the lanes' best probabilities
and a warp min of the matching expert ids (first index on ties), and the owner lane knocks that expert out."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

TOPK = 8          # the problem's TOPK (Qwen3-30B-A3B num_experts_per_tok)
_compiled = {}
_NEG_BIG = -3.0e38  # "no expert" sentinel (logits are finite)


@cute.kernel
def _topk_softmax_kernel(mX: cute.Tensor, mW: cute.Tensor, mID: cute.Tensor, experts: cutlass.Constexpr,
                         per_lane: cutlass.Constexpr, topk: cutlass.Constexpr):
    lane, _, _ = cute.arch.thread_idx()
    t, _, _ = cute.arch.block_idx()
    p = cute.make_rmem_tensor((per_lane,), cutlass.Float32)
    sel_w = cute.make_rmem_tensor((topk,), cutlass.Float32)
    sel_i = cute.make_rmem_tensor((topk,), cutlass.Int32)
    best_v = cute.make_rmem_tensor((1,), cutlass.Float32)
    best_i = cute.make_rmem_tensor((1,), cutlass.Int32)
    # Load this lane's logits; missing experts (EXPERTS not a multiple of 32) get the sentinel.
    for j in cutlass.range_constexpr(per_lane):
        p[j] = cutlass.Float32(_NEG_BIG)
        if j * 32 + lane < experts:
            p[j] = mX[t, j * 32 + lane]
    m = cutlass.Float32(_NEG_BIG)
    for j in cutlass.range_constexpr(per_lane):
        m = cute.arch.fmax(m, p[j])
    m = cute.arch.warp_reduction_max(m)
    # p <- exp(p - m) for real experts; -2 for missing ones (never selected, not summed).
    s = cutlass.Float32(0.0)
    for j in cutlass.range_constexpr(per_lane):
        e = cute.math.exp(p[j] - m)
        p[j] = cutlass.Float32(-2.0)
        if j * 32 + lane < experts:
            p[j] = e
        s = s + cute.arch.fmax(p[j], cutlass.Float32(0.0))
    s = cute.arch.warp_reduction_sum(s)
    for j in cutlass.range_constexpr(per_lane):
        if j * 32 + lane < experts:
            p[j] = p[j] / s
    # TOPK passes of a warp-wide argmax.
    for k in cutlass.range_constexpr(topk):
        best_v[0] = cutlass.Float32(-3.0)
        best_i[0] = cutlass.Int32(1 << 30)
        for j in cutlass.range_constexpr(per_lane):
            if p[j] > best_v[0]:
                best_v[0] = p[j]
                best_i[0] = j * 32 + lane
        wv = cute.arch.warp_reduction_max(best_v[0])
        cand = cutlass.Int32(1 << 30)
        if best_v[0] == wv:
            cand = best_i[0]
        wi = cute.arch.warp_reduction(cand, lambda a, b: cutlass.min(a, b))
        sel_w[k] = wv
        sel_i[k] = wi
        for j in cutlass.range_constexpr(per_lane):
            if j * 32 + lane == wi:
                p[j] = cutlass.Float32(-1.0)
    total = cutlass.Float32(0.0)
    for k in cutlass.range_constexpr(topk):
        total = total + sel_w[k]
    if lane == 0:
        for k in cutlass.range_constexpr(topk):
            mW[t, k] = sel_w[k] / total
            mID[t, k] = sel_i[k]


@cute.jit
def _topk_softmax(mX: cute.Tensor, mW: cute.Tensor, mID: cute.Tensor, tokens: cutlass.Constexpr,
                  experts: cutlass.Constexpr, per_lane: cutlass.Constexpr, topk: cutlass.Constexpr):
    _topk_softmax_kernel(mX, mW, mID, experts, per_lane, topk).launch(grid=(tokens, 1, 1), block=(32, 1, 1))


def solve(router_logits):
    tokens, experts = router_logits.shape
    if experts < TOPK or router_logits.dtype != torch.float32 or not router_logits.is_contiguous():
        raise ValueError(f"need a contiguous float32 (TOKENS, EXPERTS >= {TOPK}) tensor")
    weights = torch.empty(tokens, TOPK, dtype=torch.float32, device=router_logits.device)
    ids = torch.empty(tokens, TOPK, dtype=torch.int32, device=router_logits.device)
    args = [from_dlpack(x) for x in (router_logits, weights, ids)]
    key = (tokens, experts, TOPK)
    if key not in _compiled:
        _compiled[key] = cute.compile(_topk_softmax, *args, tokens, experts, (experts + 31) // 32, TOPK)
    _compiled[key](*args)
    return weights, ids
