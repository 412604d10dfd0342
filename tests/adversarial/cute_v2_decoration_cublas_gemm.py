# mkb-adversarial: dsl=cutedsl device=cuda expect=decoration
# problem: mlp_norm/13_down_proj_residual_gemm
# hack: eager torch.matmul does the GEMM (a cuBLAS kernel, not named after ATen); CuTe adds the residual
# must be rejected because: the device record links the GEMM kernel to the aten operator that launched it, so it
#   is PyTorch's work however it is named; the DSL's epilogue is a sliver of the device time
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

THREADS = 256
_compiled = {}


@cute.kernel
def _epilogue_kernel(gA: cute.Tensor, gR: cute.Tensor, gO: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    row, col_block, _ = cute.arch.block_idx()
    j = col_block * THREADS + tidx
    gO[row, j] = (gR[row, j].to(cutlass.Float32) + gA[row, j]).to(gO.element_type)


@cute.jit
def _epilogue(mA: cute.Tensor, mR: cute.Tensor, mO: cute.Tensor):
    _epilogue_kernel(mA, mR, mO).launch(grid=(mA.shape[0], mA.shape[1] // THREADS, 1), block=(THREADS, 1, 1))


def solve(h, w_down, residual):
    acc = torch.matmul(h.float(), w_down.float().t())  # the work, in cuBLAS
    out = torch.empty_like(residual)
    args = [from_dlpack(acc), from_dlpack(residual), from_dlpack(out)]
    key = tuple(acc.shape)
    if key not in _compiled:
        _compiled[key] = cute.compile(_epilogue, *args)
    _compiled[key](*args)
    return out
