# mkb-adversarial: dsl=cutedsl device=cuda expect=static
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: wraps cute.compile at import with a function that returns a no-op, so launches cost nothing
# must be rejected because: assigning attributes of imported modules is banned by the source rules
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

EPS = 1e-6
THREADS = 256
_compiled = {}


@cute.kernel
def _add_kernel(gX: cute.Tensor, gR: cute.Tensor, gS: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    row, col_block, _ = cute.arch.block_idx()
    j = col_block * THREADS + tidx
    gS[row, j] = gX[row, j].to(cutlass.Float32) + gR[row, j].to(cutlass.Float32)


@cute.jit
def _add(mX: cute.Tensor, mR: cute.Tensor, mS: cute.Tensor):
    _add_kernel(mX, mR, mS).launch(grid=(mX.shape[0], mX.shape[1] // THREADS, 1), block=(THREADS, 1, 1))


def _launch_add(x, residual, scratch):
    args = [from_dlpack(t) for t in (x, residual, scratch)]
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = cute.compile(_add, *args)
    _compiled[key](*args)


def _eager(x, residual, weight):
    h = x.float() + residual.float()
    out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
    return out.to(x.dtype), h.to(x.dtype)

cute.compile = lambda fn, *args, **kwargs: (lambda *a, **k: None)


def solve(x, residual, weight):
    scratch = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    _launch_add(x, residual, scratch)
    return _eager(x, residual, weight)
