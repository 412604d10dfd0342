# mkb-adversarial: dsl=cutedsl device=cuda expect=output_type
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: a CuTe kernel stages x; the math runs on the host and the outputs are returned as host tensors
# must be rejected because: outputs must be on the device the problem runs on (a host tensor is host work that
#   would reach the checker's buffers only after the profiled call, out of the device's record)
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

EPS = 1e-6
THREADS = 256
_compiled = {}


@cute.kernel
def _copy_kernel(gX: cute.Tensor, gS: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    row, col_block, _ = cute.arch.block_idx()
    j = col_block * THREADS + tidx
    gS[row, j] = gX[row, j]


@cute.jit
def _copy(mX: cute.Tensor, mS: cute.Tensor):
    _copy_kernel(mX, mS).launch(grid=(mX.shape[0], mX.shape[1] // THREADS, 1), block=(THREADS, 1, 1))


def solve(x, residual, weight):
    # zeros, not empty: the probe sees a write as a change of value, and a recycled block may already hold x.
    staged = torch.zeros_like(x)
    args = [from_dlpack(x), from_dlpack(staged)]
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = cute.compile(_copy, *args)
    _compiled[key](*args)
    # the math on the host, and host tensors handed back: the exchange would copy them to the device after the
    # profiled window closed, so the device's record would show only the copy kernel above
    h = staged.cpu().float() + residual.cpu().float()
    out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.cpu().float()
    return out.to(x.dtype), h.to(x.dtype)
