"""GPU (sm_90a) CuTe DSL solution: the row space is cut into tiles of 16 rows that never straddle two experts
(expert e owns ceil(rows_e / 16) consecutive tiles; each CTA finds its tile's expert by a running sum over the
experts' tile counts). A CTA of 256 threads computes one tile x 64 columns: thread (r, c) takes row r and columns
c, c + 16, c + 32, c + 48, accumulating the gate and up dot products over HIDDEN in fp32 registers (the 16 rows
share the expert's weight rows through L1), then writes y = silu(gate) * up as bf16."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

BM = 16            # rows per tile
BN = 64            # columns per CTA
THREADS = 256      # 16 rows x 16 column lanes, 4 columns each
_compiled = {}


@cute.kernel
def _expert_gemm_kernel(mX: cute.Tensor, mW: cute.Tensor, mOFF: cute.Tensor, mY: cute.Tensor,
                        experts: cutlass.Constexpr, hidden: cutlass.Constexpr, inter: cutlass.Constexpr):
    tx, _, _ = cute.arch.thread_idx()
    bx, by, _ = cute.arch.block_idx()
    st = cute.make_rmem_tensor((3,), cutlass.Int32)      # running tile count, expert, expert's first tile
    acc = cute.make_rmem_tensor((8,), cutlass.Float32)   # gate[0..3], up[0..3]
    st[0] = cutlass.Int32(0)
    st[1] = cutlass.Int32(0)
    st[2] = cutlass.Int32(0)
    tile = cutlass.Int32(bx)
    for e in range(experts):
        st[0] = st[0] + (mOFF[e + 1] - mOFF[e] + (BM - 1)) // BM
        if st[0] <= tile:
            st[1] = st[1] + 1
            st[2] = st[0]
    if st[1] < experts:
        ex = st[1]
        row = mOFF[ex] + (tile - st[2]) * BM + tx // 16
        if row < mOFF[ex + 1]:
            for j in cutlass.range_constexpr(8):
                acc[j] = cutlass.Float32(0.0)
            col = by * BN + tx % 16
            for k in range(hidden):
                xv = mX[row, k].to(cutlass.Float32)
                for j in cutlass.range_constexpr(4):
                    acc[j] = acc[j] + xv * mW[ex, col + 16 * j, k].to(cutlass.Float32)
                    acc[4 + j] = acc[4 + j] + xv * mW[ex, inter + col + 16 * j, k].to(cutlass.Float32)
            for j in cutlass.range_constexpr(4):
                g = acc[j]
                silu = g / (cutlass.Float32(1.0) + cute.math.exp(-g))
                mY[row, col + 16 * j] = (silu * acc[4 + j]).to(cutlass.BFloat16)


@cute.jit
def _expert_gemm(mX: cute.Tensor, mW: cute.Tensor, mOFF: cute.Tensor, mY: cute.Tensor, n_tiles: cutlass.Constexpr,
                 experts: cutlass.Constexpr, hidden: cutlass.Constexpr, inter: cutlass.Constexpr):
    _expert_gemm_kernel(mX, mW, mOFF, mY, experts, hidden, inter).launch(grid=(n_tiles, inter // BN, 1),
                                                                         block=(THREADS, 1, 1))


def solve(x, w13, expert_offsets):
    m_total, hidden = x.shape
    experts, two_inter = w13.shape[0], w13.shape[1]
    inter = two_inter // 2
    if w13.shape[2] != hidden or two_inter % 2 != 0 or inter % BN != 0:
        raise ValueError(f"w13 must be (EXPERTS, 2 * INTER, HIDDEN) with INTER a multiple of {BN}")
    if expert_offsets.dtype != torch.int32 or expert_offsets.shape != (experts + 1,):
        raise ValueError("expert_offsets must be int32 (EXPERTS + 1,)")
    if x.dtype != torch.bfloat16 or w13.dtype != torch.bfloat16:
        raise ValueError("x and w13 must be bfloat16")
    for t in (x, w13, expert_offsets):
        if not t.is_contiguous():
            raise ValueError("all tensors must be contiguous")
    y = torch.empty(m_total, inter, dtype=torch.bfloat16, device=x.device)
    args = [from_dlpack(t) for t in (x, w13, expert_offsets, y)]
    key = (m_total, experts, hidden, inter)
    if key not in _compiled:
        n_tiles = m_total // BM + experts + 1     # >= sum over experts of ceil(rows_e / BM)
        _compiled[key] = cute.compile(_expert_gemm, *args, n_tiles, experts, hidden, inter)
    _compiled[key](*args)
    return y
