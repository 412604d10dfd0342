# mkb-adversarial: dsl=cutedsl device=cuda expect=copy_only
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: the only CuTe kernel copies x into a staging buffer; eager PyTorch does all the math on the copy
# must be rejected because: a kernel that only copies an input does not count as the DSL part of the work
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
    h = staged.float() + residual.float()
    out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
    return out.to(x.dtype), h.to(x.dtype)
