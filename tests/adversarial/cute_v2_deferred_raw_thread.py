# mkb-adversarial: dsl=cutedsl device=cuda expect=correctness
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: solve launches a one-thread CuTe kernel and returns empty output buffers at once; a _thread.start_new_thread thread (invisible to threading.enumerate) launches the real CuTe rmsnorm kernel into those buffers a moment later, after the call was timed
# must be rejected because: the outputs are copied into the checker's slots (and synchronised) when solve returns, before the late kernel is even launched
# skip-static: true
import _thread
import time

import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

EPS = 1e-6
THREADS = 256
NUM_WARPS = THREADS // 32
DELAY_S = 0.05
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


@cute.kernel
def _flag_kernel(gF: cute.Tensor):
    gF[0] = cutlass.Float32(1.0)


@cute.jit
def _flag(mF: cute.Tensor):
    _flag_kernel(mF).launch(grid=(1, 1, 1), block=(1, 1, 1))


def _late(kernel, x, residual, weight, out, h):
    time.sleep(DELAY_S)
    torch.cuda.synchronize()  # any CUDA runtime call binds the device's primary context to this thread
    kernel(*[from_dlpack(t) for t in (x, residual, weight, out, h)], EPS)


def solve(x, residual, weight):
    key = tuple(x.shape)
    out, h = torch.empty_like(x), torch.empty_like(x)
    if key not in _compiled:  # compiled on the calling thread
        _compiled[key] = cute.compile(_rmsnorm, *[from_dlpack(t) for t in (x, residual, weight, out, h)], EPS)
    flag = torch.zeros(1, dtype=torch.float32, device=x.device)
    flag_args = [from_dlpack(flag)]
    if "flag" not in _compiled:
        _compiled["flag"] = cute.compile(_flag, *flag_args)
    _compiled["flag"](*flag_args)
    _thread.start_new_thread(_late, (_compiled[key], x, residual, weight, out, h))
    return out, h
