"""CPU-target (LLVM) TIRx solution, split-K like the GPU kernels: for every K slice of 512 rows (4 groups) and
packed column word c, the group's 8 zero points are unpacked from qzeros[g, c] and its 8 scales read, then each
qweight[k, c] word is unpacked with the AWQ shifts (column 8c + j at bit 2j + 14 (j % 2)), dequantised as
(q - z) * scale in float32 and accumulated into all TOKENS rows; a second loop nest sums the slices' partials and
rounds once to bf16. W is never materialised."""
import torch
import tvm
from tvm.script import tirx as T

GROUP = 128
PACK = 8
KSLICE = 512
_compiled = {}


def _build(m_rows: int, n_cols: int, k_dim: int):
    words = n_cols // PACK
    groups = k_dim // GROUP
    splits = k_dim // KSLICE
    gps = KSLICE // GROUP  # groups per slice

    @T.prim_func
    def awq_gemv(x_ptr: T.handle, qw_ptr: T.handle, s_ptr: T.handle, qz_ptr: T.handle, p_ptr: T.handle,
                 y_ptr: T.handle):
        X = T.match_buffer(x_ptr, (m_rows, k_dim), "bfloat16")
        QW = T.match_buffer(qw_ptr, (k_dim, words), "int32")
        S = T.match_buffer(s_ptr, (groups, n_cols), "bfloat16")
        QZ = T.match_buffer(qz_ptr, (groups, words), "int32")
        P = T.match_buffer(p_ptr, (splits, m_rows, n_cols), "float32")
        Y = T.match_buffer(y_ptr, (m_rows, n_cols), "bfloat16")
        acc = T.alloc_buffer((m_rows, PACK), "float32")
        zero = T.alloc_buffer((PACK,), "float32")
        scale = T.alloc_buffer((PACK,), "float32")
        w = T.alloc_buffer((PACK,), "float32")
        word = T.alloc_buffer((1,), "int32")
        tot = T.alloc_buffer((1,), "float32")
        for s in T.serial(splits):
            for c in T.serial(words):
                for m in T.serial(m_rows):
                    for j in T.serial(PACK):
                        acc[m, j] = T.float32(0)
                for gl in T.serial(gps):
                    g = s * gps + gl
                    for j in T.serial(PACK):
                        zero[j] = T.Cast("float32", T.bitwise_and(
                            T.shift_right(QZ[g, c], 2 * j + 14 * (j % 2)), 15))
                        scale[j] = T.Cast("float32", S[g, c * PACK + j])
                    for r in T.serial(GROUP):
                        word[0] = QW[g * GROUP + r, c]
                        for j in T.serial(PACK):
                            w[j] = (T.Cast("float32", T.bitwise_and(T.shift_right(word[0], 2 * j + 14 * (j % 2)), 15))
                                    - zero[j]) * scale[j]
                        for m in T.serial(m_rows):
                            for j in T.serial(PACK):
                                acc[m, j] = acc[m, j] + T.Cast("float32", X[m, g * GROUP + r]) * w[j]
                for m in T.serial(m_rows):
                    for j in T.serial(PACK):
                        P[s, m, c * PACK + j] = acc[m, j]
        for m in T.serial(m_rows):
            for n in T.serial(n_cols):
                tot[0] = T.float32(0)
                for s in T.serial(splits):
                    tot[0] = tot[0] + P[s, m, n]
                Y[m, n] = T.Cast("bfloat16", tot[0])

    return tvm.compile(tvm.IRModule({"main": awq_gemv}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor):
    m_rows, k_dim = x.shape
    n_cols = qweight.shape[1] * PACK
    if x.dtype != torch.bfloat16 or scales.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 x and scales")
    if qweight.dtype != torch.int32 or qzeros.dtype != torch.int32:
        raise ValueError("expects int32 qweight and qzeros (AWQ packing)")
    if k_dim % KSLICE != 0:
        raise ValueError(f"K={k_dim} must be a multiple of {KSLICE} (the split-K slice)")
    if qweight.shape[0] != k_dim or tuple(scales.shape) != (k_dim // GROUP, n_cols) \
            or tuple(qzeros.shape) != (k_dim // GROUP, n_cols // PACK):
        raise ValueError("expects qweight (K, N // 8), scales (K // 128, N), qzeros (K // 128, N // 8)")
    key = (m_rows, n_cols, k_dim)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    partial = torch.empty((k_dim // KSLICE, m_rows, n_cols), dtype=torch.float32)
    y = torch.empty((m_rows, n_cols), dtype=torch.bfloat16)
    _compiled[key](x.contiguous(), qweight.contiguous(), scales.contiguous(), qzeros.contiguous(), partial, y)
    return y
