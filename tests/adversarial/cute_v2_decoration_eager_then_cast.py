# mkb-adversarial: dsl=cutedsl device=cuda expect=decoration
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: eager PyTorch computes the whole answer in float32 on the GPU; the only CuTe kernel casts it to bfloat16 (plus a zero term) into the output buffers, so the outputs are DSL-written, not copies of an input, and fail under knockout and scramble
# must be rejected because: the device's kernel record (CUPTI) shows PyTorch's compute kernels (add, pow, mean, rsqrt, mul) taking more time than the CuTe kernel, which only casts: eager PyTorch did the work
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

EPS = 1e-6
THREADS = 256
_compiled = {}


@cute.kernel
def _cast_kernel(gE: cute.Tensor, gEH: cute.Tensor, gX: cute.Tensor, gY: cute.Tensor, gH: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    row, col_block, _ = cute.arch.block_idx()
    j = col_block * THREADS + tidx
    gY[row, j] = (gE[row, j] + gX[row, j].to(cutlass.Float32) * cutlass.Float32(0.0)).to(gY.element_type)
    gH[row, j] = gEH[row, j].to(gH.element_type)


@cute.jit
def _cast(mE: cute.Tensor, mEH: cute.Tensor, mX: cute.Tensor, mY: cute.Tensor, mH: cute.Tensor):
    _cast_kernel(mE, mEH, mX, mY, mH).launch(grid=(mY.shape[0], mY.shape[1] // THREADS, 1), block=(THREADS, 1, 1))


def solve(x, residual, weight):
    h = x.float() + residual.float()
    rms = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
    out, h_out = torch.empty_like(x), torch.empty_like(x)
    args = [from_dlpack(t) for t in (rms, h, x, out, h_out)]
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = cute.compile(_cast, *args)
    _compiled[key](*args)
    return out, h_out
