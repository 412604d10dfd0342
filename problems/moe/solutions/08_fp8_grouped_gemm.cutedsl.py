"""GPU (sm_90a) CuTe DSL solution: the row space is cut into tiles of BM = 32 rows that never straddle two experts
(expert e owns ceil(rows_e / 32) consecutive tiles; each CTA finds its tile's expert by a running sum over the
experts' tile counts). A CTA of 256 threads computes one 32-row x 64-column output tile: for every 64-wide K chunk
it stages the fp8 codes of its rows (zero past the expert's last row) and of the expert's 64 weight rows in shared
memory as float32 (rows padded to 65 words against bank conflicts), syncs, and thread (r, c) accumulates the raw
code products for row r and columns c, c + 8, ..., c + 56 in fp32 registers. The epilogue applies the per-token and
per-channel scales, acc * a_scale[row] * w_scale[e, col], and rounds once to bf16."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

BM = 32            # rows per tile
BN = 64            # output columns per CTA
BK = 64            # K chunk staged in shared memory
SP = BK + 1        # padded shared-memory row stride (words)
THREADS = 256      # 32 rows x 8 column lanes, 8 columns each
_compiled = {}


@cute.kernel
def _grouped_gemm_kernel(mA: cute.Tensor, mAS: cute.Tensor, mW: cute.Tensor, mWS: cute.Tensor, mOFF: cute.Tensor,
                         mY: cute.Tensor, experts: cutlass.Constexpr, hidden: cutlass.Constexpr):
    tx, _, _ = cute.arch.thread_idx()
    bx, by, _ = cute.arch.block_idx()
    smem = cutlass.memory.SmemAllocator()
    a_s = smem.allocate_tensor(cutlass.Float32, cute.make_layout(BM * SP))
    w_s = smem.allocate_tensor(cutlass.Float32, cute.make_layout(BN * SP))
    st = cute.make_rmem_tensor((3,), cutlass.Int32)      # running tile count, expert, expert's first tile
    acc = cute.make_rmem_tensor((8,), cutlass.Float32)
    st[0] = cutlass.Int32(0)
    st[1] = cutlass.Int32(0)
    st[2] = cutlass.Int32(0)
    tile = cutlass.Int32(bx)
    for e in range(experts):
        st[0] = st[0] + (mOFF[e + 1] - mOFF[e] + (BM - 1)) // BM
        if st[0] <= tile:
            st[1] = st[1] + 1
            st[2] = st[0]
    if st[1] < experts:                                  # uniform over the CTA: the barriers below are safe
        ex = st[1]
        row0 = mOFF[ex] + (tile - st[2]) * BM
        row_end = mOFF[ex + 1]
        col0 = by * BN
        for j in cutlass.range_constexpr(8):
            acc[j] = cutlass.Float32(0.0)
        for kb in range(hidden // BK):
            for i in cutlass.range_constexpr(BM * BK // THREADS):
                q = i * THREADS + tx
                r = q // BK
                kk = q % BK
                if row0 + r < row_end:
                    a_s[r * SP + kk] = mA[row0 + r, kb * BK + kk].to(cutlass.Float32)
                else:
                    a_s[r * SP + kk] = cutlass.Float32(0.0)
            for i in cutlass.range_constexpr(BN * BK // THREADS):
                q = i * THREADS + tx
                c = q // BK
                kk = q % BK
                w_s[c * SP + kk] = mW[ex, col0 + c, kb * BK + kk].to(cutlass.Float32)
            cute.arch.sync_threads()
            for kk in range(BK):
                av = a_s[(tx // 8) * SP + kk]
                for j in cutlass.range_constexpr(8):
                    acc[j] = acc[j] + av * w_s[(tx % 8 + 8 * j) * SP + kk]
            cute.arch.sync_threads()
        row = row0 + tx // 8
        if row < row_end:
            for j in cutlass.range_constexpr(8):
                col = col0 + tx % 8 + 8 * j
                mY[row, col] = (acc[j] * mAS[row] * mWS[ex, col]).to(cutlass.BFloat16)


@cute.jit
def _grouped_gemm(mA: cute.Tensor, mAS: cute.Tensor, mW: cute.Tensor, mWS: cute.Tensor, mOFF: cute.Tensor,
                  mY: cute.Tensor, n_tiles: cutlass.Constexpr, experts: cutlass.Constexpr,
                  hidden: cutlass.Constexpr, inter: cutlass.Constexpr):
    _grouped_gemm_kernel(mA, mAS, mW, mWS, mOFF, mY, experts, hidden).launch(
        grid=(n_tiles, inter // BN, 1), block=(THREADS, 1, 1))


def solve(a, a_scale, w, w_scale, expert_offsets):
    m_total, hidden = a.shape
    experts, inter = w.shape[0], w.shape[1]
    if a.dtype != torch.float8_e4m3fn or w.dtype != torch.float8_e4m3fn:
        raise ValueError("a and w must be float8_e4m3fn")
    if w.shape[2] != hidden or hidden % BK != 0 or inter % BN != 0:
        raise ValueError(f"w must be (EXPERTS, INTER, HIDDEN) with HIDDEN a multiple of {BK}, INTER of {BN}")
    if a_scale.dtype != torch.float32 or a_scale.shape != (m_total,):
        raise ValueError("a_scale must be float32 (M_TOTAL,)")
    if w_scale.dtype != torch.float32 or w_scale.shape != (experts, inter):
        raise ValueError("w_scale must be float32 (EXPERTS, INTER)")
    if expert_offsets.dtype != torch.int32 or expert_offsets.shape != (experts + 1,):
        raise ValueError("expert_offsets must be int32 (EXPERTS + 1,)")
    for t in (a, a_scale, w, w_scale, expert_offsets):
        if not t.is_contiguous():
            raise ValueError("all tensors must be contiguous")
    y = torch.empty(m_total, inter, dtype=torch.bfloat16, device=a.device)
    args = [from_dlpack(t) for t in (a, a_scale, w, w_scale, expert_offsets, y)]
    key = (m_total, experts, hidden, inter)
    if key not in _compiled:
        n_tiles = m_total // BM + experts + 1     # >= sum over experts of ceil(rows_e / BM)
        _compiled[key] = cute.compile(_grouped_gemm, *args, n_tiles, experts, hidden, inter)
    _compiled[key](*args)
    return y
