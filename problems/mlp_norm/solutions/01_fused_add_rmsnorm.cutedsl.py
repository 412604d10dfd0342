"""CuTe DSL (sm_90a) solution: one CTA of 256 threads per token row. Pass 1 writes h = x + residual and sums h*h
(warp shuffles, then one shared-memory slot per warp); pass 2 recomputes h in fp32 and writes h * rstd * weight."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

EPS = 1e-6
THREADS = 256
NUM_WARPS = THREADS // 32
_compiled = {}


@cute.kernel
def _rmsnorm_kernel(gX: cute.Tensor, gR: cute.Tensor, gW: cute.Tensor, gY: cute.Tensor, gH: cute.Tensor,
                    eps: cutlass.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    hidden = gX.shape[1]
    smem = cutlass.memory.SmemAllocator()
    red = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS))

    acc = cutlass.Float32(0.0)
    for k in range(hidden // THREADS):
        j = k * THREADS + tidx
        h = gX[row, j].to(cutlass.Float32) + gR[row, j].to(cutlass.Float32)
        gH[row, j] = h.to(gH.element_type)
        acc = acc + h * h
    acc = cute.arch.warp_reduction_sum(acc)
    if tidx % 32 == 0:
        red[tidx // 32] = acc
    cute.arch.sync_threads()
    total = cutlass.Float32(0.0)
    for w in cutlass.range_constexpr(NUM_WARPS):
        total = total + red[w]
    rstd = cute.math.rsqrt(total / cutlass.Float32(hidden) + eps)

    for k in range(hidden // THREADS):
        j = k * THREADS + tidx
        h = gX[row, j].to(cutlass.Float32) + gR[row, j].to(cutlass.Float32)
        gY[row, j] = (h * rstd * gW[j].to(cutlass.Float32)).to(gY.element_type)


@cute.jit
def _rmsnorm(mX: cute.Tensor, mR: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, mH: cute.Tensor,
             eps: cutlass.Float32):
    _rmsnorm_kernel(mX, mR, mW, mY, mH, eps).launch(grid=(mX.shape[0], 1, 1), block=(THREADS, 1, 1))


def solve(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor):
    tokens, hidden = x.shape
    if hidden % THREADS != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {THREADS}")
    if x.dtype != torch.bfloat16 or residual.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 inputs")
    x = x.contiguous()
    residual = residual.contiguous()
    weight = weight.contiguous()
    out = torch.empty_like(x)
    h = torch.empty_like(x)
    args = [from_dlpack(t) for t in (x, residual, weight, out, h)]
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = cute.compile(_rmsnorm, *args, EPS)
    _compiled[key](*args, EPS)
    return out, h
