"""GPU (sm_90a) CuTe DSL solution: one thread per element, one warp per 32-wide MX block, CTAs of 256 threads (8
blocks) over (HIDDEN / 256, TOKENS). The block's absmax is a warp butterfly max; the e8m0 exponent e =
ceil(log2(amax / 448)) is read off amax's float32 bits without a division (448 = 1.75 * 2^8: biased exponent - 135,
plus one when the mantissa field exceeds 1.75's 0x600000; clamped at -127, which an all-zero block gets) and lane 0
stores the byte e + 127. Each lane multiplies by 2^-e (exact, built in the exponent field) and encodes e4m3fn bits
with round to nearest even: normals by adding the RNE bias to the float32 bits and dropping 20 mantissa bits,
subnormals (|y| < 2^-6) as roundeven(|y| * 512). The kernel writes uint8 bits that solve() views as float8_e4m3fn."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

BLOCK = 32
FP8_MAX = 448.0
THREADS = 256
_compiled = {}


@cute.kernel
def _mx_kernel(gX: cute.Tensor, gQ: cute.Tensor, gS: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    cb, row, _ = cute.arch.block_idx()
    col = cb * THREADS + tidx
    xv = gX[row, col].to(cutlass.Float32)
    amax = cute.arch.warp_reduction_max(cute.math.absf(xv))
    # amax = 1.f * 2^(E - 127) and 448 = 1.75 * 2^8: ceil(log2(amax / 448)) = E - 135, plus one when the
    # significand 1.f exceeds 1.75 (mantissa field above 0x600000); clamped to e8m0's -127. No division.
    rb = amax.bitcast(cutlass.Int32)
    e = (rb >> 23) - 135
    if (rb & 0x7FFFFF) > 0x600000:
        e = e + 1
    e = cutlass.max(e, cutlass.Int32(-127))
    if tidx % 32 == 0:
        gS[row, col // BLOCK] = (e + 127).to(cutlass.Uint8)
    inv = ((127 - e) << 23).bitcast(cutlass.Float32)                   # 2^-e, exact
    y = cute.arch.fmin(cute.arch.fmax(xv * inv, cutlass.Float32(-FP8_MAX)), cutlass.Float32(FP8_MAX))
    u = y.bitcast(cutlass.Int32)
    a = u & 0x7FFFFFFF
    code = cutlass.Int32(0)
    if a < 0x3C800000:                                                 # |y| < 2^-6: e4m3 subnormal
        code = cute.math.roundeven(cute.math.absf(y) * cutlass.Float32(512.0)).to(cutlass.Int32)
    else:
        code = ((a + 0x7FFFF + ((a >> 20) & 1)) >> 20) - 960
    if u < 0:
        code = code | 128
    gQ[row, col] = code.to(cutlass.Uint8)


@cute.jit
def _mx(mX: cute.Tensor, mQ: cute.Tensor, mS: cute.Tensor):
    _mx_kernel(mX, mQ, mS).launch(grid=(mX.shape[1] // THREADS, mX.shape[0], 1), block=(THREADS, 1, 1))


def solve(x: torch.Tensor):
    tokens, hidden = x.shape
    if x.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 x")
    if hidden % THREADS != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {THREADS} (8 MX blocks of {BLOCK} per CTA)")
    x = x.contiguous()
    q = torch.empty((tokens, hidden), dtype=torch.uint8, device=x.device)
    scales = torch.empty((tokens, hidden // BLOCK), dtype=torch.uint8, device=x.device)
    args = [from_dlpack(t) for t in (x, q, scales)]
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = cute.compile(_mx, *args)
    _compiled[key](*args)
    return q.view(torch.float8_e4m3fn), scales
