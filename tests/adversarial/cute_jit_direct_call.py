# mkb-adversarial: dsl=cutedsl device=cuda expect=dsl_launch
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: an honest CuTe kernel run by calling the @cute.jit function directly (JIT on call) instead of launching cute.compile's result
# must be rejected because: only launches of cute.compile's compiled object are counted; an uncounted call cannot be knocked out or checked
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

EPS = 1e-6
THREADS = 256
_compiled = {}

NUM_WARPS = THREADS // 32


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


def solve(x, residual, weight):
    out = torch.empty_like(x)
    h = torch.empty_like(x)
    args = [from_dlpack(t) for t in (x, residual, weight, out, h)]
    _rmsnorm(*args, EPS)  # direct call of the @cute.jit function: compiled and run, but not a counted launch
    return out, h
