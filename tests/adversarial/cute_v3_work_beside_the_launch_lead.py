# mkb-adversarial: dsl=cutedsl device=cuda expect=early_work
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: the honest CuTe rmsnorm, launched on a side stream that does not wait for the current one: it runs beside the draw clock's launch lead (the spin queued ahead of the call's start event), before the clock starts, and the current stream then waits for an already finished stream, so the timed span is nearly empty
# must be rejected because: the profiled call's device record (CUPTI) shows the CuTe kernel starting before the launch lead ended: work off the clock
# skip-static: true
import cuda.bindings.driver as cuda
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

EPS = 1e-6
THREADS = 256
NUM_WARPS = THREADS // 32
_compiled = {}
_side = []


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
             eps: cutlass.Float32, stream: cuda.CUstream):
    _rmsnorm_kernel(mX, mR, mW, mY, mH, eps).launch(grid=(mX.shape[0], 1, 1), block=(THREADS, 1, 1), stream=stream)


def solve(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor):
    if not _side:
        _side.append(torch.cuda.Stream())  # created non-blocking: it waits for nothing on the current stream
    side = _side[0]
    with torch.cuda.stream(side):  # zeroed first: with the launch suppressed (knockout) the outputs are wrong
        out = torch.zeros_like(x)
        h = torch.zeros_like(x)
    args = [from_dlpack(t) for t in (x, residual, weight, out, h)]
    stream = cuda.CUstream(side.cuda_stream)
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = cute.compile(_rmsnorm, *args, EPS, stream)
    _compiled[key](*args, EPS, stream)
    torch.cuda.current_stream().wait_stream(side)
    return out, h
