"""GPU (sm_90a) TIRx solution in two kernels of one module. gemv: grid (N / 1024, K / 512), one thread per packed
column word c (128 threads: consecutive threads read consecutive qweight words, coalesced) and K slice of 512 rows
(4 groups); per group it unpacks the 8 zero points from qzeros[g, c] and loads the 8 scales, then streams
qweight[k, c], unpacks the 8 nibbles with the AWQ shifts (column 8c + j at bit 2j + 14 (j % 2)), dequantises
(q - z) * scale in float32 registers and accumulates all TOKENS rows (x[m, k] is a CTA-wide broadcast load) into
8 x TOKENS register accumulators, written as the slice's fp32 partial. reduce: one thread per output sums the
slices in a fixed order and rounds once to bf16. W is never materialised."""
import torch
import tvm
from tvm.script import tirx as T

GROUP = 128
PACK = 8
KSLICE = 512
THREADS = 128      # packed words (8 columns each) per CTA
RTHREADS = 256
_compiled = {}


def _build(m_rows: int, n_cols: int, k_dim: int):
    words = n_cols // PACK
    groups = k_dim // GROUP
    splits = k_dim // KSLICE
    gps = KSLICE // GROUP

    @T.prim_func
    def gemv(x_ptr: T.handle, qw_ptr: T.handle, s_ptr: T.handle, qz_ptr: T.handle, p_ptr: T.handle):
        X = T.match_buffer(x_ptr, (m_rows, k_dim), "bfloat16")
        QW = T.match_buffer(qw_ptr, (k_dim, words), "int32")
        S = T.match_buffer(s_ptr, (groups, n_cols), "bfloat16")
        QZ = T.match_buffer(qz_ptr, (groups, words), "int32")
        P = T.match_buffer(p_ptr, (splits, m_rows, n_cols), "float32")
        T.device_entry()
        wb, s = T.cta_id([words // THREADS, splits])
        tx = T.thread_id([THREADS])
        acc = T.alloc_local((m_rows * PACK,), "float32")
        zero = T.alloc_local((PACK,), "float32")
        scale = T.alloc_local((PACK,), "float32")
        w = T.alloc_local((PACK,), "float32")
        c = wb * THREADS + tx
        for i in T.unroll(m_rows * PACK):
            acc[i] = T.float32(0)
        for gl in T.serial(gps):
            g = s * gps + gl
            zw = QZ[g, c]
            for j in T.unroll(PACK):
                zero[j] = T.Cast("float32", T.bitwise_and(T.shift_right(zw, 2 * j + 14 * (j % 2)), 15))
                scale[j] = T.Cast("float32", S[g, c * PACK + j])
            for r in T.serial(GROUP):
                k = g * GROUP + r
                word = QW[k, c]
                for j in T.unroll(PACK):
                    w[j] = (T.Cast("float32", T.bitwise_and(T.shift_right(word, 2 * j + 14 * (j % 2)), 15))
                            - zero[j]) * scale[j]
                for m in T.unroll(m_rows):
                    xv = T.Cast("float32", X[m, k])
                    for j in T.unroll(PACK):
                        acc[m * PACK + j] = acc[m * PACK + j] + xv * w[j]
        for m in T.unroll(m_rows):
            for j in T.unroll(PACK):
                P[s, m, c * PACK + j] = acc[m * PACK + j]

    @T.prim_func
    def reduce(p_ptr: T.handle, y_ptr: T.handle):
        P = T.match_buffer(p_ptr, (splits, m_rows, n_cols), "float32")
        Y = T.match_buffer(y_ptr, (m_rows, n_cols), "bfloat16")
        T.device_entry()
        nb, m = T.cta_id([n_cols // RTHREADS, m_rows])
        tx = T.thread_id([RTHREADS])
        tot = T.alloc_local((1,), "float32")
        tot[0] = T.float32(0)
        for s in T.serial(splits):
            tot[0] = tot[0] + P[s, m, nb * RTHREADS + tx]
        Y[m, nb * RTHREADS + tx] = T.Cast("bfloat16", tot[0])

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    exe = tvm.compile(tvm.IRModule({"gemv": gemv, "reduce": reduce}), target=target, tir_pipeline="tirx")
    return exe["gemv"], exe["reduce"]


def solve(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor):
    m_rows, k_dim = x.shape
    n_cols = qweight.shape[1] * PACK
    if x.dtype != torch.bfloat16 or scales.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 x and scales")
    if qweight.dtype != torch.int32 or qzeros.dtype != torch.int32:
        raise ValueError("expects int32 qweight and qzeros (AWQ packing)")
    if k_dim % KSLICE != 0 or n_cols % (THREADS * PACK) != 0 or not 1 <= m_rows <= 8:
        raise ValueError(f"needs K % {KSLICE} == 0, N % {THREADS * PACK} == 0 and 1 <= TOKENS <= 8; "
                         f"got K={k_dim}, N={n_cols}, TOKENS={m_rows}")
    if qweight.shape[0] != k_dim or tuple(scales.shape) != (k_dim // GROUP, n_cols) \
            or tuple(qzeros.shape) != (k_dim // GROUP, n_cols // PACK):
        raise ValueError("expects qweight (K, N // 8), scales (K // 128, N), qzeros (K // 128, N // 8)")
    key = (m_rows, n_cols, k_dim)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    gemv, reduce = _compiled[key]
    partial = torch.empty((k_dim // KSLICE, m_rows, n_cols), dtype=torch.float32, device=x.device)
    y = torch.empty((m_rows, n_cols), dtype=torch.bfloat16, device=x.device)
    gemv(x.contiguous(), qweight.contiguous(), scales.contiguous(), qzeros.contiguous(), partial)
    reduce(partial, y)
    return y
