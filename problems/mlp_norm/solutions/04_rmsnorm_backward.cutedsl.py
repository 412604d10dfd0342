"""CuTe DSL (sm_90a) solution: one jit function launching three kernels: fp32 arithmetic, fp64 accumulation of dweight.
rows: one CTA of 256 threads per token row; one pass sums x*x and g*x (g = dy * weight), reduced with warp
shuffles and one shared slot per warp (a separate shared array per sum), giving rstd and c = rstd * mean(g * x);
a second pass writes dx = rstd * (g - x * rstd * c); thread 0 keeps rstd for the next kernel.
partials: grid (hidden / 256, token chunks of 64); each thread owns one column and sums the fp32 products
dy * x * rstd over its chunk's tokens in fp64 (coalesced across threads), writing partial[chunk, column]; fp64
because a long fp32 sum over tokens drifts past the fp32 tolerance.
final: one thread per column sums the chunk partials in fp64 and rounds once to fp32 (fixed order:
deterministic, no atomics)."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

EPS = 1e-5
THREADS = 256
NUM_WARPS = THREADS // 32
TOKEN_CHUNK = 64
_compiled = {}


@cute.kernel
def _rows_kernel(gX: cute.Tensor, gW: cute.Tensor, gDY: cute.Tensor, gDX: cute.Tensor, gR: cute.Tensor,
                 eps: cutlass.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    hidden = gX.shape[1]
    smem = cutlass.memory.SmemAllocator()
    red_xx = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS))
    red_gx = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS))

    sxx = cutlass.Float32(0.0)
    sgx = cutlass.Float32(0.0)
    for k in range(hidden // THREADS):
        j = k * THREADS + tidx
        xv = gX[row, j].to(cutlass.Float32)
        sxx = sxx + xv * xv
        sgx = sgx + gDY[row, j].to(cutlass.Float32) * gW[j].to(cutlass.Float32) * xv
    sxx = cute.arch.warp_reduction_sum(sxx)
    sgx = cute.arch.warp_reduction_sum(sgx)
    if tidx % 32 == 0:
        red_xx[tidx // 32] = sxx
        red_gx[tidx // 32] = sgx
    cute.arch.sync_threads()
    txx = cutlass.Float32(0.0)
    tgx = cutlass.Float32(0.0)
    for w in cutlass.range_constexpr(NUM_WARPS):
        txx = txx + red_xx[w]
        tgx = tgx + red_gx[w]
    rstd = cute.math.rsqrt(txx / cutlass.Float32(hidden) + eps)
    c = rstd * tgx / cutlass.Float32(hidden)

    for k in range(hidden // THREADS):
        j = k * THREADS + tidx
        g = gDY[row, j].to(cutlass.Float32) * gW[j].to(cutlass.Float32)
        gDX[row, j] = (rstd * (g - gX[row, j].to(cutlass.Float32) * rstd * c)).to(gDX.element_type)
    if tidx == 0:
        gR[row] = rstd


@cute.kernel
def _partials_kernel(gX: cute.Tensor, gDY: cute.Tensor, gR: cute.Tensor, gP: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    cb, c, _ = cute.arch.block_idx()
    tokens = gX.shape[0]
    j = cb * THREADS + tidx
    acc = cutlass.Float64(0.0)
    for t in range(TOKEN_CHUNK):
        tok = c * TOKEN_CHUNK + t
        if tok < tokens:
            prod = gDY[tok, j].to(cutlass.Float32) * gX[tok, j].to(cutlass.Float32) * gR[tok]
            acc = acc + prod.to(cutlass.Float64)
    gP[c, j] = acc


@cute.kernel
def _final_kernel(gP: cute.Tensor, gDW: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    cb, _, _ = cute.arch.block_idx()
    j = cb * THREADS + tidx
    acc = cutlass.Float64(0.0)
    for c in range(gP.shape[0]):
        acc = acc + gP[c, j]
    gDW[j] = acc.to(cutlass.Float32)


@cute.jit
def _rmsnorm_backward(mX: cute.Tensor, mW: cute.Tensor, mDY: cute.Tensor, mDX: cute.Tensor, mR: cute.Tensor,
                      mP: cute.Tensor, mDW: cute.Tensor, eps: cutlass.Float32):
    col_blocks = mX.shape[1] // THREADS
    _rows_kernel(mX, mW, mDY, mDX, mR, eps).launch(grid=(mX.shape[0], 1, 1), block=(THREADS, 1, 1))
    _partials_kernel(mX, mDY, mR, mP).launch(grid=(col_blocks, mP.shape[0], 1), block=(THREADS, 1, 1))
    _final_kernel(mP, mDW).launch(grid=(col_blocks, 1, 1), block=(THREADS, 1, 1))


def solve(x: torch.Tensor, weight: torch.Tensor, dy: torch.Tensor):
    tokens, hidden = x.shape
    if hidden % THREADS != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {THREADS}")
    if x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16 or dy.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 x, weight and dy")
    if dy.shape != x.shape or weight.shape != (hidden,):
        raise ValueError("dy must match x and weight must have shape (hidden,)")
    chunks = (tokens + TOKEN_CHUNK - 1) // TOKEN_CHUNK
    x = x.contiguous()
    dy = dy.contiguous()
    dx = torch.empty_like(x)
    rstd = torch.empty(tokens, dtype=torch.float32, device=x.device)
    part = torch.empty(chunks, hidden, dtype=torch.float64, device=x.device)
    dweight = torch.empty(hidden, dtype=torch.float32, device=x.device)
    args = [from_dlpack(t) for t in (x, weight.contiguous(), dy, dx, rstd, part, dweight)]
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = cute.compile(_rmsnorm_backward, *args, EPS)
    _compiled[key](*args, EPS)
    return dx, dweight
