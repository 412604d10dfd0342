"""GPU (sm_90a) CuTe DSL solution: one warp-sized CTA per token; lane l owns expert g * 32 + l of every group g
(groups of 32 experts), keeping its sigmoid score and biased choice value in register tensors. A group's top-2
sum is a warp max, a warp min of the matching lane (first on ties) and a warp max over the other lanes; each lane
ranks the 8 group scores itself and knocks out the dropped groups; then each of the TOPK passes takes a warp max
of the lanes' best choice values and a warp min of the matching expert ids, and the owner lane hands over its
sigmoid score (a warp max) and knocks the expert out."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

N_GROUP = 8        # the problem's constants (DeepSeek-V3; not inferable from the inputs)
TOPK_GROUP = 4
TOPK = 8
SCALE = 2.5
_NEG_BIG = -3.0e38
_compiled = {}


@cute.kernel
def _grouped_topk_kernel(mX: cute.Tensor, mB: cute.Tensor, mW: cute.Tensor, mID: cute.Tensor):
    lane, _, _ = cute.arch.thread_idx()
    t, _, _ = cute.arch.block_idx()
    s = cute.make_rmem_tensor((N_GROUP,), cutlass.Float32)
    c = cute.make_rmem_tensor((N_GROUP,), cutlass.Float32)
    gs = cute.make_rmem_tensor((N_GROUP,), cutlass.Float32)
    sel_w = cute.make_rmem_tensor((TOPK,), cutlass.Float32)
    sel_i = cute.make_rmem_tensor((TOPK,), cutlass.Int32)
    best_v = cute.make_rmem_tensor((1,), cutlass.Float32)
    best_i = cute.make_rmem_tensor((1,), cutlass.Int32)
    for g in cutlass.range_constexpr(N_GROUP):
        x = mX[t, g * 32 + lane]
        s[g] = cutlass.Float32(1.0) / (cutlass.Float32(1.0) + cute.math.exp(-x))
        c[g] = s[g] + mB[g * 32 + lane]
    for g in cutlass.range_constexpr(N_GROUP):
        m1 = cute.arch.warp_reduction_max(c[g])
        cand = cutlass.Int32(32)
        if c[g] == m1:
            cand = cutlass.Int32(lane)
        i1 = cute.arch.warp_reduction(cand, lambda a, b: cutlass.min(a, b))
        other = c[g]
        if cutlass.Int32(lane) == i1:
            other = cutlass.Float32(_NEG_BIG)
        m2 = cute.arch.warp_reduction_max(other)
        gs[g] = m1 + m2
    for g in cutlass.range_constexpr(N_GROUP):
        rank = cutlass.Int32(0)
        for h in cutlass.range_constexpr(N_GROUP):
            if gs[h] > gs[g]:
                rank = rank + 1
        if rank >= TOPK_GROUP:
            c[g] = cutlass.Float32(_NEG_BIG)
    for k in cutlass.range_constexpr(TOPK):
        best_v[0] = cutlass.Float32(_NEG_BIG)
        best_i[0] = cutlass.Int32(1 << 30)
        for g in cutlass.range_constexpr(N_GROUP):
            if c[g] > best_v[0]:
                best_v[0] = c[g]
                best_i[0] = g * 32 + lane
        wv = cute.arch.warp_reduction_max(best_v[0])
        cand = cutlass.Int32(1 << 30)
        if best_v[0] == wv:
            cand = best_i[0]
        wi = cute.arch.warp_reduction(cand, lambda a, b: cutlass.min(a, b))
        own = cutlass.Float32(-1.0)
        for g in cutlass.range_constexpr(N_GROUP):
            if g * 32 + lane == wi:
                own = s[g]
                c[g] = cutlass.Float32(_NEG_BIG)
        sel_w[k] = cute.arch.warp_reduction_max(own)
        sel_i[k] = wi
    total = cutlass.Float32(0.0)
    for k in cutlass.range_constexpr(TOPK):
        total = total + sel_w[k]
    if lane == 0:
        for k in cutlass.range_constexpr(TOPK):
            mW[t, k] = sel_w[k] / total * cutlass.Float32(SCALE)
            mID[t, k] = sel_i[k]


@cute.jit
def _grouped_topk(mX: cute.Tensor, mB: cute.Tensor, mW: cute.Tensor, mID: cute.Tensor, tokens: cutlass.Constexpr):
    _grouped_topk_kernel(mX, mB, mW, mID).launch(grid=(tokens, 1, 1), block=(32, 1, 1))


def solve(router_logits, correction_bias):
    tokens, experts = router_logits.shape
    if experts != N_GROUP * 32 or correction_bias.shape != (experts,):
        raise ValueError(f"EXPERTS must be {N_GROUP} groups of 32 (one lane per expert) and the bias (EXPERTS,)")
    if router_logits.dtype != torch.float32 or correction_bias.dtype != torch.float32:
        raise ValueError("router_logits and correction_bias must be float32")
    if not router_logits.is_contiguous() or not correction_bias.is_contiguous():
        raise ValueError("inputs must be contiguous")
    weights = torch.empty(tokens, TOPK, dtype=torch.float32, device=router_logits.device)
    ids = torch.empty(tokens, TOPK, dtype=torch.int32, device=router_logits.device)
    args = [from_dlpack(x) for x in (router_logits, correction_bias, weights, ids)]
    key = (tokens, experts)
    if key not in _compiled:
        _compiled[key] = cute.compile(_grouped_topk, *args, tokens)
    _compiled[key](*args)
    return weights, ids
