"""GPU (sm_90a) CuTe DSL solution, two kernels launched by one jit function. gemv: grid (N / 1024, K / 512), one
thread per packed column word c (128 threads: consecutive threads read consecutive qweight words, coalesced) and K
slice of 512 rows (4 groups); per group it unpacks the 8 zero points from qzeros[g, c] and loads the 8 scales, then
streams qweight[k, c], unpacks the 8 nibbles with the AWQ shifts (column 8c + j at bit 2j + 14 (j % 2)),
dequantises (q - z) * scale in float32 registers and accumulates all TOKENS rows into 8 x TOKENS register
accumulators, written as the slice's fp32 partial. reduce: one thread per output sums the slices in a fixed order
and rounds once to bf16. W is never materialised."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

GROUP = 128
PACK = 8
KSLICE = 512
THREADS = 128      # packed words (8 columns each) per CTA
RTHREADS = 256
_compiled = {}


@cute.kernel
def _gemv_kernel(gX: cute.Tensor, gQW: cute.Tensor, gS: cute.Tensor, gQZ: cute.Tensor, gP: cute.Tensor,
                 m_rows: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    wb, s, _ = cute.arch.block_idx()
    c = wb * THREADS + tidx
    acc = cute.make_rmem_tensor((m_rows * PACK,), cutlass.Float32)
    zero = cute.make_rmem_tensor((PACK,), cutlass.Float32)
    scale = cute.make_rmem_tensor((PACK,), cutlass.Float32)
    w = cute.make_rmem_tensor((PACK,), cutlass.Float32)
    for i in cutlass.range_constexpr(m_rows * PACK):
        acc[i] = cutlass.Float32(0.0)
    for gl in range(KSLICE // GROUP):
        g = s * (KSLICE // GROUP) + gl
        zw = gQZ[g, c]
        for j in cutlass.range_constexpr(PACK):
            zero[j] = ((zw >> (2 * j + 14 * (j % 2))) & 15).to(cutlass.Float32)
            scale[j] = gS[g, c * PACK + j].to(cutlass.Float32)
        for r in range(GROUP):
            k = g * GROUP + r
            word = gQW[k, c]
            for j in cutlass.range_constexpr(PACK):
                w[j] = (((word >> (2 * j + 14 * (j % 2))) & 15).to(cutlass.Float32) - zero[j]) * scale[j]
            for m in cutlass.range_constexpr(m_rows):
                xv = gX[m, k].to(cutlass.Float32)
                for j in cutlass.range_constexpr(PACK):
                    acc[m * PACK + j] = acc[m * PACK + j] + xv * w[j]
    for m in cutlass.range_constexpr(m_rows):
        for j in cutlass.range_constexpr(PACK):
            gP[s, m, c * PACK + j] = acc[m * PACK + j]


@cute.kernel
def _reduce_kernel(gP: cute.Tensor, gY: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    nb, m, _ = cute.arch.block_idx()
    n = nb * RTHREADS + tidx
    tot = cutlass.Float32(0.0)
    for s in range(gP.shape[0]):
        tot = tot + gP[s, m, n]
    gY[m, n] = tot.to(cutlass.BFloat16)


@cute.jit
def _awq_gemv(mX: cute.Tensor, mQW: cute.Tensor, mS: cute.Tensor, mQZ: cute.Tensor, mP: cute.Tensor,
              mY: cute.Tensor, m_rows: cutlass.Constexpr):
    _gemv_kernel(mX, mQW, mS, mQZ, mP, m_rows).launch(grid=(mQW.shape[1] // THREADS, mP.shape[0], 1),
                                                      block=(THREADS, 1, 1))
    _reduce_kernel(mP, mY).launch(grid=(mY.shape[1] // RTHREADS, m_rows, 1), block=(RTHREADS, 1, 1))


def solve(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor):
    m_rows, k_dim = x.shape
    n_cols = qweight.shape[1] * PACK
    if x.dtype != torch.bfloat16 or scales.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 x and scales")
    if qweight.dtype != torch.int32 or qzeros.dtype != torch.int32:
        raise ValueError("expects int32 qweight and qzeros (AWQ packing)")
    if k_dim % KSLICE != 0 or n_cols % (THREADS * PACK) != 0 or not 1 <= m_rows <= 8:
        raise ValueError(f"needs K % {KSLICE} == 0, N % {THREADS * PACK} == 0 and 1 <= TOKENS <= 8; "
                         f"got K={k_dim}, N={n_cols}, TOKENS={m_rows}")
    if qweight.shape[0] != k_dim or tuple(scales.shape) != (k_dim // GROUP, n_cols) \
            or tuple(qzeros.shape) != (k_dim // GROUP, n_cols // PACK):
        raise ValueError("expects qweight (K, N // 8), scales (K // 128, N), qzeros (K // 128, N // 8)")
    x, qweight, scales, qzeros = x.contiguous(), qweight.contiguous(), scales.contiguous(), qzeros.contiguous()
    partial = torch.empty((k_dim // KSLICE, m_rows, n_cols), dtype=torch.float32, device=x.device)
    y = torch.empty((m_rows, n_cols), dtype=torch.bfloat16, device=x.device)
    args = [from_dlpack(t) for t in (x, qweight, scales, qzeros, partial, y)]
    key = (m_rows, n_cols, k_dim)
    if key not in _compiled:
        _compiled[key] = cute.compile(_awq_gemv, *args, m_rows)
    _compiled[key](*args)
    return y
