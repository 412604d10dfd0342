"""GPU (sm_90a) TIRx solution: the row space is cut into tiles of 16 rows that never straddle two experts (expert
e owns ceil(rows_e / 16) consecutive tiles; each CTA finds its tile's expert by a running sum over the experts'
tile counts). A CTA of 256 threads computes one tile x 64 columns: thread (r, c) takes row r and columns
c, c + 16, c + 32, c + 48, accumulating the gate and up dot products over HIDDEN in fp32 (the 16 rows share the
expert's weight rows through L1), then writes y = silu(gate) * up as bf16 (IEEE __fdiv_rn in the SiLU)."""
import torch
import tvm
from tvm.script import tirx as T

BM = 16            # rows per tile
BN = 64            # columns per CTA
THREADS = 256      # 16 rows x 16 column lanes, 4 columns each
_compiled = {}
_TARGET = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})


def _build(m_total, experts, hidden, inter):
    n_tiles = m_total // BM + experts + 1     # >= sum over experts of ceil(rows_e / BM)

    @T.prim_func
    def expert_gemm(x_ptr: T.handle, w_ptr: T.handle, off_ptr: T.handle, y_ptr: T.handle):
        X = T.match_buffer(x_ptr, (m_total, hidden), "bfloat16")
        W = T.match_buffer(w_ptr, (experts, 2 * inter, hidden), "bfloat16")
        OFF = T.match_buffer(off_ptr, (experts + 1,), "int32")
        Y = T.match_buffer(y_ptr, (m_total, inter), "bfloat16")
        T.device_entry()
        bx, by = T.cta_id([n_tiles, inter // BN])
        tx = T.thread_id([THREADS])
        st = T.alloc_local((3,), "int32")        # running tile count, expert, expert's first tile
        acc = T.alloc_local((8,), "float32")     # gate[0..3], up[0..3]
        st[0] = 0
        st[1] = 0
        st[2] = 0
        for e in T.serial(experts):
            st[0] = st[0] + (OFF[e + 1] - OFF[e] + BM - 1) // BM
            if st[0] <= bx:
                st[1] = st[1] + 1
                st[2] = st[0]
        if st[1] < experts:
            row = OFF[st[1]] + (bx - st[2]) * BM + tx // 16
            if row < OFF[st[1] + 1]:
                for j in T.unroll(8):
                    acc[j] = T.float32(0)
                for k in T.serial(hidden):
                    xv = T.Cast("float32", X[row, k])
                    for j in T.unroll(4):
                        acc[j] = acc[j] + xv * T.Cast("float32", W[st[1], by * BN + tx % 16 + 16 * j, k])
                        acc[4 + j] = acc[4 + j] + xv * T.Cast("float32",
                                                              W[st[1], inter + by * BN + tx % 16 + 16 * j, k])
                for j in T.unroll(4):
                    silu = T.call_pure_extern("float32", "__fdiv_rn", acc[j], T.float32(1) + T.exp(-acc[j]))
                    Y[row, by * BN + tx % 16 + 16 * j] = T.Cast("bfloat16", silu * acc[4 + j])

    return tvm.compile(tvm.IRModule({"main": expert_gemm}), target=_TARGET, tir_pipeline="tirx")["main"]


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
    key = (m_total, experts, hidden, inter)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    y = torch.empty(m_total, inter, dtype=torch.bfloat16, device=x.device)
    _compiled[key](x, w13, expert_offsets, y)
    return y
