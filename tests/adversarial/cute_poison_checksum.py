# mkb-adversarial: dsl=cutedsl device=cuda expect=knockout
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: a one-thread CuTe kernel writes 0 * x[0, 0]; that zero is added to eagerly computed outputs, so knockout's NaN poison breaks them
# must be rejected because: the outputs depend on the DSL only through a zero term, which survives the scramble knockout (written values permuted)
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

EPS = 1e-6
THREADS = 256
_compiled = {}


def _eager(x, residual, weight):
    h = x.float() + residual.float()
    out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
    return out.to(x.dtype), h.to(x.dtype)


@cute.kernel
def _zero_kernel(gX: cute.Tensor, gS: cute.Tensor):
    gS[0] = gX[0, 0].to(cutlass.Float32) * cutlass.Float32(0.0)


@cute.jit
def _zero(mX: cute.Tensor, mS: cute.Tensor):
    _zero_kernel(mX, mS).launch(grid=(1, 1, 1), block=(1, 1, 1))


def solve(x, residual, weight):
    zero = torch.ones(1, dtype=torch.float32, device=x.device)  # not empty(): a recycled 0.0 would hide the write
    args = [from_dlpack(x), from_dlpack(zero)]
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = cute.compile(_zero, *args)
    _compiled[key](*args)
    out, h = _eager(x, residual, weight)
    return (out.float() + zero).to(x.dtype), (h.float() + zero).to(x.dtype)
