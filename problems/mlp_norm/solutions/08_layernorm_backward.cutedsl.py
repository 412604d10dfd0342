"""CuTe DSL (sm_90a) solution: one jit function launching three kernels; fp32 arithmetic, fp64 accumulation
over tokens.
rows: one CTA of 256 threads per token row; with xhat = (x - mean) * rstd from the saved statistics and
g = dy * weight, one pass sums g and g * xhat (warp shuffles, then one shared slot per warp, a separate shared
array per sum) and a second pass writes dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
partials: grid (hidden / 256, token chunks of 64); each thread owns one column and sums the fp32 terms dy * xhat
and dy over its chunk's tokens in fp64 (coalesced across threads), writing partial[chunk, column]; fp64 because a
long fp32 sum over tokens drifts past the fp32 tolerance.
final: one thread per column sums the chunk partials in fp64 and rounds dweight and dbias once to fp32 (fixed
order: deterministic, no atomics)."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

THREADS = 256
NUM_WARPS = THREADS // 32
TOKEN_CHUNK = 64
_compiled = {}


@cute.kernel
def _rows_kernel(gDY: cute.Tensor, gX: cute.Tensor, gM: cute.Tensor, gR: cute.Tensor, gW: cute.Tensor,
                 gDX: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    hidden = gX.shape[1]
    smem = cutlass.memory.SmemAllocator()
    red_g = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS))
    red_gx = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS))
    mu = gM[row]
    rs = gR[row]

    sg = cutlass.Float32(0.0)
    sgx = cutlass.Float32(0.0)
    for k in range(hidden // THREADS):
        j = k * THREADS + tidx
        g = gDY[row, j].to(cutlass.Float32) * gW[j].to(cutlass.Float32)
        sg = sg + g
        sgx = sgx + g * ((gX[row, j].to(cutlass.Float32) - mu) * rs)
    sg = cute.arch.warp_reduction_sum(sg)
    sgx = cute.arch.warp_reduction_sum(sgx)
    if tidx % 32 == 0:
        red_g[tidx // 32] = sg
        red_gx[tidx // 32] = sgx
    cute.arch.sync_threads()
    tg = cutlass.Float32(0.0)
    tgx = cutlass.Float32(0.0)
    for w in cutlass.range_constexpr(NUM_WARPS):
        tg = tg + red_g[w]
        tgx = tgx + red_gx[w]
    mean_g = tg / cutlass.Float32(hidden)
    mean_gx = tgx / cutlass.Float32(hidden)

    for k in range(hidden // THREADS):
        j = k * THREADS + tidx
        g = gDY[row, j].to(cutlass.Float32) * gW[j].to(cutlass.Float32)
        xhat = (gX[row, j].to(cutlass.Float32) - mu) * rs
        gDX[row, j] = (rs * (g - mean_g - xhat * mean_gx)).to(gDX.element_type)


@cute.kernel
def _partials_kernel(gDY: cute.Tensor, gX: cute.Tensor, gM: cute.Tensor, gR: cute.Tensor, gPW: cute.Tensor,
                     gPB: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    cb, c, _ = cute.arch.block_idx()
    tokens = gX.shape[0]
    j = cb * THREADS + tidx
    aw = cutlass.Float64(0.0)
    ab = cutlass.Float64(0.0)
    for t in range(TOKEN_CHUNK):
        tok = c * TOKEN_CHUNK + t
        if tok < tokens:
            dyv = gDY[tok, j].to(cutlass.Float32)
            xhat = (gX[tok, j].to(cutlass.Float32) - gM[tok]) * gR[tok]
            aw = aw + (dyv * xhat).to(cutlass.Float64)
            ab = ab + dyv.to(cutlass.Float64)
    gPW[c, j] = aw
    gPB[c, j] = ab


@cute.kernel
def _final_kernel(gPW: cute.Tensor, gPB: cute.Tensor, gDW: cute.Tensor, gDB: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    cb, _, _ = cute.arch.block_idx()
    j = cb * THREADS + tidx
    aw = cutlass.Float64(0.0)
    ab = cutlass.Float64(0.0)
    for c in range(gPW.shape[0]):
        aw = aw + gPW[c, j]
        ab = ab + gPB[c, j]
    gDW[j] = aw.to(cutlass.Float32)
    gDB[j] = ab.to(cutlass.Float32)


@cute.jit
def _layernorm_backward(mDY: cute.Tensor, mX: cute.Tensor, mM: cute.Tensor, mR: cute.Tensor, mW: cute.Tensor,
                        mDX: cute.Tensor, mPW: cute.Tensor, mPB: cute.Tensor, mDW: cute.Tensor, mDB: cute.Tensor):
    col_blocks = mX.shape[1] // THREADS
    _rows_kernel(mDY, mX, mM, mR, mW, mDX).launch(grid=(mX.shape[0], 1, 1), block=(THREADS, 1, 1))
    _partials_kernel(mDY, mX, mM, mR, mPW, mPB).launch(grid=(col_blocks, mPW.shape[0], 1), block=(THREADS, 1, 1))
    _final_kernel(mPW, mPB, mDW, mDB).launch(grid=(col_blocks, 1, 1), block=(THREADS, 1, 1))


def solve(dy: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor, weight: torch.Tensor):
    tokens, hidden = x.shape
    if dy.dtype != torch.bfloat16 or x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 dy, x and weight")
    if mean.dtype != torch.float32 or rstd.dtype != torch.float32:
        raise ValueError("expects float32 mean and rstd")
    if dy.shape != x.shape or mean.shape != (tokens,) or rstd.shape != (tokens,) or weight.shape != (hidden,):
        raise ValueError("shape mismatch among dy, x, mean, rstd, weight")
    if hidden % THREADS != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {THREADS}")
    chunks = (tokens + TOKEN_CHUNK - 1) // TOKEN_CHUNK
    dx = torch.empty_like(x)
    pw = torch.empty(chunks, hidden, dtype=torch.float64, device=x.device)
    pb = torch.empty(chunks, hidden, dtype=torch.float64, device=x.device)
    dweight = torch.empty(hidden, dtype=torch.float32, device=x.device)
    dbias = torch.empty(hidden, dtype=torch.float32, device=x.device)
    tensors = (dy.contiguous(), x.contiguous(), mean.contiguous(), rstd.contiguous(), weight.contiguous(), dx, pw,
               pb, dweight, dbias)
    args = [from_dlpack(t) for t in tensors]
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = cute.compile(_layernorm_backward, *args)
    _compiled[key](*args)
    return dx, dweight, dbias
