"""CuTe DSL (sm_90a) solution: one CTA of 256 threads per token row. Pass 1 sums x (warp shuffles, then one
shared-memory slot per warp) for the mean; pass 2 sums the squared deviations from that mean (two-pass variance,
on a second shared array so the two reductions cannot race); pass 3 writes (x - mean) * rstd * weight + bias in
fp32, rounded once to bf16."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

EPS = 1e-5
THREADS = 256
NUM_WARPS = THREADS // 32
_compiled = {}


@cute.kernel
def _layernorm_kernel(gX: cute.Tensor, gW: cute.Tensor, gB: cute.Tensor, gY: cute.Tensor, eps: cutlass.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    hidden = gX.shape[1]
    smem = cutlass.memory.SmemAllocator()
    red_sum = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS))
    red_sq = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS))

    acc = cutlass.Float32(0.0)
    for k in range(hidden // THREADS):
        acc = acc + gX[row, k * THREADS + tidx].to(cutlass.Float32)
    acc = cute.arch.warp_reduction_sum(acc)
    if tidx % 32 == 0:
        red_sum[tidx // 32] = acc
    cute.arch.sync_threads()
    total = cutlass.Float32(0.0)
    for w in cutlass.range_constexpr(NUM_WARPS):
        total = total + red_sum[w]
    mean = total / cutlass.Float32(hidden)

    sq = cutlass.Float32(0.0)
    for k in range(hidden // THREADS):
        d = gX[row, k * THREADS + tidx].to(cutlass.Float32) - mean
        sq = sq + d * d
    sq = cute.arch.warp_reduction_sum(sq)
    if tidx % 32 == 0:
        red_sq[tidx // 32] = sq
    cute.arch.sync_threads()
    total_sq = cutlass.Float32(0.0)
    for w in cutlass.range_constexpr(NUM_WARPS):
        total_sq = total_sq + red_sq[w]
    rstd = cute.math.rsqrt(total_sq / cutlass.Float32(hidden) + eps)

    for k in range(hidden // THREADS):
        j = k * THREADS + tidx
        y = (gX[row, j].to(cutlass.Float32) - mean) * rstd * gW[j].to(cutlass.Float32) + gB[j].to(cutlass.Float32)
        gY[row, j] = y.to(gY.element_type)


@cute.jit
def _layernorm(mX: cute.Tensor, mW: cute.Tensor, mB: cute.Tensor, mY: cute.Tensor, eps: cutlass.Float32):
    _layernorm_kernel(mX, mW, mB, mY, eps).launch(grid=(mX.shape[0], 1, 1), block=(THREADS, 1, 1))


def solve(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
    tokens, hidden = x.shape
    if hidden % THREADS != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {THREADS}")
    if x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16 or bias.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 x, weight and bias")
    if weight.shape != (hidden,) or bias.shape != (hidden,):
        raise ValueError(f"weight and bias must have shape ({hidden},)")
    x = x.contiguous()
    out = torch.empty_like(x)
    args = [from_dlpack(t) for t in (x, weight.contiguous(), bias.contiguous(), out)]
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = cute.compile(_layernorm, *args, EPS)
    _compiled[key](*args, EPS)
    return out
