"""GPU (sm_90a) CuTe DSL solution: one CTA of 128 threads per (weight row n, 256-wide K span = two groups); thread
tx owns packed byte tx of the span (coalesced byte loads), unpacks its two 4-bit codes with a mask and a shift (low
nibble = even k), takes the group's 4-bit zero point from the span's shared zero byte (low nibble for the first
group, high nibble for the second), and writes (q - z) * scale, exact in float32, rounded to bf16."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

GROUP = 128
THREADS = 128   # packed bytes per CTA = 256 k values = two groups = one zero-point byte
_compiled = {}


@cute.kernel
def _dequant_kernel(gQW: cute.Tensor, gS: cute.Tensor, gQZ: cute.Tensor, gW: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    sp, n, _ = cute.arch.block_idx()
    half = tidx // (GROUP // 2)               # which of the span's two groups
    g = 2 * sp + half
    zero = (gQZ[n, sp].to(cutlass.Int32) >> (4 * half)) & 15
    scale = gS[n, g].to(cutlass.Float32)
    byte = gQW[n, sp * THREADS + tidx].to(cutlass.Int32)
    k0 = sp * (2 * THREADS) + 2 * tidx
    gW[n, k0] = (((byte & 15) - zero).to(cutlass.Float32) * scale).to(cutlass.BFloat16)
    gW[n, k0 + 1] = (((byte >> 4) - zero).to(cutlass.Float32) * scale).to(cutlass.BFloat16)


@cute.jit
def _dequant(mQW: cute.Tensor, mS: cute.Tensor, mQZ: cute.Tensor, mW: cute.Tensor):
    _dequant_kernel(mQW, mS, mQZ, mW).launch(grid=(mQZ.shape[1], mQW.shape[0], 1), block=(THREADS, 1, 1))


def solve(qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor):
    n_rows, k_half = qweight.shape
    k_dim = 2 * k_half
    if qweight.dtype != torch.uint8 or qzeros.dtype != torch.uint8 or scales.dtype != torch.bfloat16:
        raise ValueError("expects uint8 qweight and qzeros, bfloat16 scales")
    if k_dim % (2 * GROUP) != 0:
        raise ValueError(f"K={k_dim} must be a multiple of {2 * GROUP} (zero points are packed two groups a byte)")
    groups = k_dim // GROUP
    if tuple(scales.shape) != (n_rows, groups) or tuple(qzeros.shape) != (n_rows, groups // 2):
        raise ValueError("expects scales (N, K // 128) and qzeros (N, K // 256)")
    qweight, scales, qzeros = qweight.contiguous(), scales.contiguous(), qzeros.contiguous()
    w = torch.empty((n_rows, k_dim), dtype=torch.bfloat16, device=qweight.device)
    args = [from_dlpack(t) for t in (qweight, scales, qzeros, w)]
    key = (n_rows, k_dim)
    if key not in _compiled:
        _compiled[key] = cute.compile(_dequant, *args)
    _compiled[key](*args)
    return w
