"""GPU (sm_90a) CuTe DSL solution: one CTA of 256 threads per token row. Pass 1: each thread takes the absmax of
its strided elements of x / smooth (fp32), then warp shuffles and one shared-memory slot per warp give the row's
absmax; pass 2 recomputes x / smooth, divides by scale = max(amax, 1e-6) / 127, rounds to nearest even and clamps
to [-127, 127] as int8. The smoothed row lives only in registers."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

INT8_MAX = 127.0
AMAX_FLOOR = 1e-6
THREADS = 256
NUM_WARPS = THREADS // 32
_compiled = {}


@cute.kernel
def _sq_kernel(gX: cute.Tensor, gSM: cute.Tensor, gQ: cute.Tensor, gS: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    hidden = gX.shape[1]
    smem = cutlass.memory.SmemAllocator()
    red = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS))

    amax = cutlass.Float32(0.0)
    for k in range(hidden // THREADS):
        j = k * THREADS + tidx
        xs = gX[row, j].to(cutlass.Float32) / gSM[j]
        amax = cute.arch.fmax(amax, cute.math.absf(xs))
    amax = cute.arch.warp_reduction_max(amax)
    if tidx % 32 == 0:
        red[tidx // 32] = amax
    cute.arch.sync_threads()
    total = red[0]
    for w in cutlass.range_constexpr(1, NUM_WARPS):
        total = cute.arch.fmax(total, red[w])
    scale = cute.arch.fmax(total, cutlass.Float32(AMAX_FLOOR)) / cutlass.Float32(INT8_MAX)
    if tidx == 0:
        gS[row, 0] = scale
    for k in range(hidden // THREADS):
        j = k * THREADS + tidx
        xs = gX[row, j].to(cutlass.Float32) / gSM[j]
        v = cute.math.roundeven(xs / scale)
        v = cute.arch.fmin(cute.arch.fmax(v, cutlass.Float32(-INT8_MAX)), cutlass.Float32(INT8_MAX))
        gQ[row, j] = v.to(cutlass.Int8)


@cute.jit
def _sq(mX: cute.Tensor, mSM: cute.Tensor, mQ: cute.Tensor, mS: cute.Tensor):
    _sq_kernel(mX, mSM, mQ, mS).launch(grid=(mX.shape[0], 1, 1), block=(THREADS, 1, 1))


def solve(x: torch.Tensor, smooth: torch.Tensor):
    tokens, hidden = x.shape
    if hidden % THREADS != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {THREADS}")
    if x.dtype != torch.bfloat16 or smooth.dtype != torch.float32:
        raise ValueError("expects bfloat16 x and float32 smooth")
    if tuple(smooth.shape) != (hidden,):
        raise ValueError(f"smooth must be ({hidden},), got {tuple(smooth.shape)}")
    x = x.contiguous()
    smooth = smooth.contiguous()
    q = torch.empty((tokens, hidden), dtype=torch.int8, device=x.device)
    scale = torch.empty((tokens, 1), dtype=torch.float32, device=x.device)
    args = [from_dlpack(t) for t in (x, smooth, q, scale)]
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = cute.compile(_sq, *args)
    _compiled[key](*args)
    return q, scale
