"""GPU (sm_90a) TIRx solution: the row space is cut into tiles of BM = 32 rows that never straddle two experts
(expert e owns ceil(rows_e / 32) consecutive tiles; each CTA finds its tile's expert by a running sum over the
experts' tile counts). A CTA of 256 threads computes one 32-row x 64-column output tile: for every 64-wide K chunk
it stages the fp8 codes of its rows (zero past the expert's last row) and of the expert's 64 weight rows in shared
memory as float32 (rows padded to 65 words against bank conflicts), syncs, and thread (r, c) accumulates the raw
code products for row r and columns c, c + 8, ..., c + 56 in fp32 registers. The epilogue applies the per-token and
per-channel scales, acc * a_scale[row] * w_scale[e, col], and rounds once to bf16."""
import torch
import tvm
from tvm.script import tirx as T

BM = 32            # rows per tile
BN = 64            # output columns per CTA
BK = 64            # K chunk staged in shared memory
SP = BK + 1        # padded shared-memory row stride (words)
THREADS = 256      # 32 rows x 8 column lanes, 8 columns each
_compiled = {}
_TARGET = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})


def _build(m_total, experts, hidden, inter):
    n_tiles = m_total // BM + experts + 1     # >= sum over experts of ceil(rows_e / BM)

    @T.prim_func
    def grouped_gemm(a_ptr: T.handle, as_ptr: T.handle, w_ptr: T.handle, ws_ptr: T.handle, off_ptr: T.handle,
                     y_ptr: T.handle):
        A = T.match_buffer(a_ptr, (m_total, hidden), "float8_e4m3fn")
        AS = T.match_buffer(as_ptr, (m_total,), "float32")
        W = T.match_buffer(w_ptr, (experts, inter, hidden), "float8_e4m3fn")
        WS = T.match_buffer(ws_ptr, (experts, inter), "float32")
        OFF = T.match_buffer(off_ptr, (experts + 1,), "int32")
        Y = T.match_buffer(y_ptr, (m_total, inter), "bfloat16")
        T.device_entry()
        bx, by = T.cta_id([n_tiles, inter // BN])
        tx = T.thread_id([THREADS])
        a_s = T.alloc_shared((BM * SP,), "float32")
        w_s = T.alloc_shared((BN * SP,), "float32")
        st = T.alloc_local((3,), "int32")          # running tile count, expert, expert's first tile
        acc = T.alloc_local((8,), "float32")
        st[0] = 0
        st[1] = 0
        st[2] = 0
        for e in T.serial(experts):
            st[0] = st[0] + (OFF[e + 1] - OFF[e] + BM - 1) // BM
            if st[0] <= bx:
                st[1] = st[1] + 1
                st[2] = st[0]
        if st[1] < experts:                        # uniform over the CTA: the barriers below are safe
            row0 = OFF[st[1]] + (bx - st[2]) * BM
            for j in T.unroll(8):
                acc[j] = T.float32(0)
            for kb in T.serial(hidden // BK):
                for i in T.unroll(BM * BK // THREADS):
                    r = (i * THREADS + tx) // BK
                    kk = (i * THREADS + tx) % BK
                    if row0 + r < OFF[st[1] + 1]:
                        a_s[r * SP + kk] = T.Cast("float32", A[row0 + r, kb * BK + kk])
                    else:
                        a_s[r * SP + kk] = T.float32(0)
                for i in T.unroll(BN * BK // THREADS):
                    c = (i * THREADS + tx) // BK
                    kk = (i * THREADS + tx) % BK
                    w_s[c * SP + kk] = T.Cast("float32", W[st[1], by * BN + c, kb * BK + kk])
                T.cuda.cta_sync()
                for kk in T.serial(BK):
                    for j in T.unroll(8):
                        acc[j] = acc[j] + a_s[(tx // 8) * SP + kk] * w_s[(tx % 8 + 8 * j) * SP + kk]
                T.cuda.cta_sync()
            if row0 + tx // 8 < OFF[st[1] + 1]:
                for j in T.unroll(8):
                    Y[row0 + tx // 8, by * BN + tx % 8 + 8 * j] = T.Cast(
                        "bfloat16", acc[j] * AS[row0 + tx // 8] * WS[st[1], by * BN + tx % 8 + 8 * j])

    return tvm.compile(tvm.IRModule({"main": grouped_gemm}), target=_TARGET, tir_pipeline="tirx")["main"]


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
    y = torch.empty(m_total, inter, dtype=torch.bfloat16, device=a.device)
    _compiled[key](a, a_scale, w, w_scale, expert_offsets, y)
    return y
