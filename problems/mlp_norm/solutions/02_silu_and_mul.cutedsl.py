"""CuTe DSL (sm_90a) solution: one thread per output element, grid (tokens, intermediate / 256);
out = gate / (1 + exp(-gate)) * up computed in fp32 and rounded once to bf16."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

THREADS = 256
_compiled = {}


@cute.kernel
def _silu_mul_kernel(gX: cute.Tensor, gO: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    row, col_block, _ = cute.arch.block_idx()
    d = gO.shape[1]
    j = col_block * THREADS + tidx
    g = gX[row, j].to(cutlass.Float32)
    u = gX[row, d + j].to(cutlass.Float32)
    s = g / (cutlass.Float32(1.0) + cute.math.exp(-g))
    gO[row, j] = (s * u).to(gO.element_type)


@cute.jit
def _silu_mul(mX: cute.Tensor, mO: cute.Tensor):
    _silu_mul_kernel(mX, mO).launch(grid=(mO.shape[0], mO.shape[1] // THREADS, 1), block=(THREADS, 1, 1))


def solve(x: torch.Tensor):
    tokens, two_d = x.shape
    d = two_d // 2
    if two_d % 2 != 0 or d % THREADS != 0:
        raise ValueError(f"last dim {two_d} must be 2 * a multiple of {THREADS}")
    if x.dtype != torch.bfloat16:
        raise ValueError("expects a bfloat16 input")
    x = x.contiguous()
    out = torch.empty(tokens, d, dtype=x.dtype, device=x.device)
    args = [from_dlpack(x), from_dlpack(out)]
    key = (tokens, d)
    if key not in _compiled:
        _compiled[key] = cute.compile(_silu_mul, *args)
    _compiled[key](*args)
    return out
