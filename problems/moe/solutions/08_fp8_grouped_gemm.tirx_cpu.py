"""CPU-target (LLVM) TIRx solution, the GPU kernel's tiling run serially: the row space is cut into tiles of 32 rows
that never straddle two experts (a tile finds its expert by a running sum over the experts' tile counts); for each
tile x 64-column block and each 64-wide K chunk, the fp8 codes of the tile's rows (zero past the expert's last row)
and of the expert's 64 weight rows are decoded to float32 (exact integer bit arithmetic, read through uint8 views)
into staging buffers, and each of the 256 "threads" (row r, columns c, c + 8, ..., c + 56) accumulates the raw code
products in fp32. The epilogue applies acc * a_scale[row] * w_scale[e, col] and rounds once to bf16."""
import torch
import tvm
from tvm.script import tirx as T

BM = 32            # rows per tile
BN = 64            # output columns per block
BK = 64            # K chunk staged
SP = BK + 1        # staging row stride (as the GPU kernel's padded shared memory)
THREADS = 256      # 32 rows x 8 column lanes, 8 columns each
_compiled = {}


def _e4m3(code):
    """Exact float32 of the float8_e4m3fn bit pattern `code` (int32 0..255; the inputs hold no NaN)."""
    exp = T.bitwise_and(T.shift_right(code, 3), 15)
    man = T.bitwise_and(code, 7)
    normal = T.reinterpret("float32", T.bitwise_or(T.shift_left(exp + 120, 23), T.shift_left(man, 20)))
    mag = T.Select(exp == 0, T.Cast("float32", man) * T.float32(1.0 / 512.0), normal)
    return T.Select(T.bitwise_and(code, 128) != 0, -mag, mag)


def _build(m_total, experts, hidden, inter):
    n_tiles = m_total // BM + experts + 1     # >= sum over experts of ceil(rows_e / BM)

    @T.prim_func
    def grouped_gemm(a_ptr: T.handle, as_ptr: T.handle, w_ptr: T.handle, ws_ptr: T.handle, off_ptr: T.handle,
                     y_ptr: T.handle):
        A = T.match_buffer(a_ptr, (m_total, hidden), "uint8")
        AS = T.match_buffer(as_ptr, (m_total,), "float32")
        W = T.match_buffer(w_ptr, (experts, inter, hidden), "uint8")
        WS = T.match_buffer(ws_ptr, (experts, inter), "float32")
        OFF = T.match_buffer(off_ptr, (experts + 1,), "int32")
        Y = T.match_buffer(y_ptr, (m_total, inter), "bfloat16")
        a_s = T.alloc_buffer((BM * SP,), "float32")
        w_s = T.alloc_buffer((BN * SP,), "float32")
        st = T.alloc_buffer((3,), "int32")          # running tile count, expert, expert's first tile
        acc = T.alloc_buffer((THREADS * 8,), "float32")
        for bx in T.serial(n_tiles):
            st[0] = 0
            st[1] = 0
            st[2] = 0
            for e in T.serial(experts):
                st[0] = st[0] + (OFF[e + 1] - OFF[e] + BM - 1) // BM
                if st[0] <= bx:
                    st[1] = st[1] + 1
                    st[2] = st[0]
            if st[1] < experts:
                for by in T.serial(inter // BN):
                    for q in T.serial(THREADS * 8):
                        acc[q] = T.float32(0)
                    for kb in T.serial(hidden // BK):
                        for r in T.serial(BM):
                            for kk in T.serial(BK):
                                if OFF[st[1]] + (bx - st[2]) * BM + r < OFF[st[1] + 1]:
                                    a_s[r * SP + kk] = _e4m3(T.Cast(
                                        "int32", A[OFF[st[1]] + (bx - st[2]) * BM + r, kb * BK + kk]))
                                else:
                                    a_s[r * SP + kk] = T.float32(0)
                        for c in T.serial(BN):
                            for kk in T.serial(BK):
                                w_s[c * SP + kk] = _e4m3(T.Cast("int32", W[st[1], by * BN + c, kb * BK + kk]))
                        for tx in T.serial(THREADS):
                            for kk in T.serial(BK):
                                for j in T.serial(8):
                                    acc[tx * 8 + j] = acc[tx * 8 + j] + a_s[(tx // 8) * SP + kk] * w_s[
                                        (tx % 8 + 8 * j) * SP + kk]
                    for tx in T.serial(THREADS):
                        if OFF[st[1]] + (bx - st[2]) * BM + tx // 8 < OFF[st[1] + 1]:
                            for j in T.serial(8):
                                Y[OFF[st[1]] + (bx - st[2]) * BM + tx // 8, by * BN + tx % 8 + 8 * j] = T.Cast(
                                    "bfloat16", acc[tx * 8 + j] * AS[OFF[st[1]] + (bx - st[2]) * BM + tx // 8]
                                    * WS[st[1], by * BN + tx % 8 + 8 * j])

    return tvm.compile(tvm.IRModule({"main": grouped_gemm}), target="llvm", tir_pipeline="tirx")["main"]


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
    key = (m_total, experts, hidden, inter)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    y = torch.empty(m_total, inter, dtype=torch.bfloat16)
    _compiled[key](a.view(torch.uint8), a_scale, w.view(torch.uint8), w_scale, expert_offsets, y)
    return y
