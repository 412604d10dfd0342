"""GPU (sm_90a) CuTe DSL solution: one CTA of 128 threads per (token, group of 128 channels), one element per
thread; warp-shuffle + shared-memory amax, then x / scale rounded to fp8 e4m3fn bits in integer arithmetic (round
to nearest even, exact match of torch's cast for |y| <= 448). The kernel writes uint8 bits that solve() views as
float8_e4m3fn."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

GROUP = 128
NUM_WARPS = GROUP // 32
FP8_MAX = 448.0
AMAX_FLOOR = 1e-4
_compiled = {}


@cute.jit
def _fp8_e4m3_bits(y: cutlass.Float32) -> cutlass.Int32:
    """float32 (|y| <= 448) -> e4m3fn bit pattern, round to nearest even."""
    u = y.bitcast(cutlass.Int32)
    a = u & 0x7FFFFFFF
    ex = (a >> 23) - 127                                   # unbiased float32 exponent
    e = cutlass.max(ex, cutlass.Int32(-6))                 # e4m3 exponent (-6: subnormal range)
    mant = (a & 0x7FFFFF) | 0x800000
    sh = cutlass.min(e - ex + 20, cutlass.Int32(25))       # keep 3 mantissa bits (fewer if subnormal)
    qv = mant >> sh
    rem = mant & ((cutlass.Int32(1) << sh) - 1)
    half = cutlass.Int32(1) << (sh - 1)
    up = cutlass.Int32(0)
    if rem > half:
        up = cutlass.Int32(1)
    if rem == half:
        up = qv & 1                                        # tie: round to even
    code = (e + 6) * 8 + qv + up                           # a mantissa carry bumps the exponent
    if u < 0:
        code = code | 128
    return code


@cute.kernel
def _quant_kernel(gX: cute.Tensor, gQ: cute.Tensor, gS: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bid, _, _ = cute.arch.block_idx()
    groups = gS.shape[1]
    row = bid // groups
    g = bid % groups
    col = g * GROUP + tidx

    smem = cutlass.memory.SmemAllocator()
    red = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS))

    xv = gX[row, col].to(cutlass.Float32)
    amax = cute.arch.warp_reduction_max(cute.arch.fmax(xv, -xv))
    warp = tidx // 32
    lane = tidx % 32
    if lane == 0:
        red[warp] = amax
    cute.arch.barrier()
    total = red[0]
    for w in cutlass.range_constexpr(1, NUM_WARPS):
        total = cute.arch.fmax(total, red[w])

    scale = cute.arch.fmax(total, cutlass.Float32(AMAX_FLOOR)) / cutlass.Float32(FP8_MAX)
    if tidx == 0:
        gS[row, g] = scale
    y = xv / scale
    y = cute.arch.fmin(cute.arch.fmax(y, cutlass.Float32(-FP8_MAX)), cutlass.Float32(FP8_MAX))
    gQ[row, col] = _fp8_e4m3_bits(y).to(cutlass.Uint8)


@cute.jit
def _quant(mX: cute.Tensor, mQ: cute.Tensor, mS: cute.Tensor):
    blocks = mS.shape[0] * mS.shape[1]
    _quant_kernel(mX, mQ, mS).launch(grid=(blocks, 1, 1), block=(GROUP, 1, 1))


def solve(x: torch.Tensor):
    tokens, hidden = x.shape
    if hidden % GROUP != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {GROUP}")
    q = torch.empty((tokens, hidden), dtype=torch.uint8, device=x.device)
    scale = torch.empty((tokens, hidden // GROUP), dtype=torch.float32, device=x.device)
    args = (from_dlpack(x), from_dlpack(q), from_dlpack(scale))
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = cute.compile(_quant, *args)
    _compiled[key](*args)
    return q.view(torch.float8_e4m3fn), scale
