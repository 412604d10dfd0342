"""CPU-target (LLVM) TIRx solution: per output row m, the fp8 codes of A's row are decoded once (integer bit
arithmetic, e4m3fn -> float32, exact); then for every output column n and every 128-wide K block, the block's dot
product of raw fp8 values is accumulated in float32 and scaled by a_scale[m, kb] * b_scale[n // 128, kb] before it
is added to the float32 accumulator (DeepSeek-V3's scale application inside the K loop). The fp8 inputs are read
through uint8 views."""
import torch
import tvm
from tvm.script import tirx as T

BLOCK = 128
_compiled = {}


def _e4m3_to_f32(code):
    """float32 value of the float8_e4m3fn bit pattern `code` (int32 0..255, never NaN), exact."""
    e = T.bitwise_and(T.shift_right(code, 3), 15)
    m = T.bitwise_and(code, 7)
    normal = T.reinterpret("float32", T.bitwise_or(T.shift_left(e + 120, 23), T.shift_left(m, 20)))
    subnormal = T.Cast("float32", m) * T.float32(2.0 ** -9)
    mag = T.Select(e == 0, subnormal, normal)
    return T.Select(code >= 128, -mag, mag)


def _build(m_rows: int, n_cols: int, k_dim: int):
    kb_n = k_dim // BLOCK
    nb_n = n_cols // BLOCK

    @T.prim_func
    def fp8_block_gemm(a_ptr: T.handle, as_ptr: T.handle, b_ptr: T.handle, bs_ptr: T.handle, y_ptr: T.handle):
        A = T.match_buffer(a_ptr, (m_rows, k_dim), "uint8")
        AS = T.match_buffer(as_ptr, (m_rows, kb_n), "float32")
        B = T.match_buffer(b_ptr, (n_cols, k_dim), "uint8")
        BS = T.match_buffer(bs_ptr, (nb_n, kb_n), "float32")
        Y = T.match_buffer(y_ptr, (m_rows, n_cols), "bfloat16")
        a_row = T.alloc_buffer((k_dim,), "float32")
        acc = T.alloc_buffer((1,), "float32")
        part = T.alloc_buffer((1,), "float32")
        for i in T.serial(m_rows):
            for k in T.serial(k_dim):
                a_row[k] = _e4m3_to_f32(T.Cast("int32", A[i, k]))
            for j in T.serial(n_cols):
                acc[0] = T.float32(0)
                for kb in T.serial(kb_n):
                    part[0] = T.float32(0)
                    for kk in T.serial(BLOCK):
                        part[0] = part[0] + a_row[kb * BLOCK + kk] * _e4m3_to_f32(
                            T.Cast("int32", B[j, kb * BLOCK + kk]))
                    acc[0] = acc[0] + part[0] * (AS[i, kb] * BS[j // BLOCK, kb])
                Y[i, j] = T.Cast("bfloat16", acc[0])

    module = tvm.IRModule({"main": fp8_block_gemm})
    return tvm.compile(module, target="llvm", tir_pipeline="tirx")["main"]


def solve(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor):
    m_rows, k_dim = a.shape
    n_cols = b.shape[0]
    if a.dtype != torch.float8_e4m3fn or b.dtype != torch.float8_e4m3fn:
        raise ValueError("a and b must be float8_e4m3fn")
    if a_scale.dtype != torch.float32 or b_scale.dtype != torch.float32:
        raise ValueError("scales must be float32")
    if k_dim % BLOCK != 0 or n_cols % BLOCK != 0 or b.shape[1] != k_dim:
        raise ValueError(f"K={k_dim} and N={n_cols} must be multiples of {BLOCK}, and b must be (N, K)")
    if tuple(a_scale.shape) != (m_rows, k_dim // BLOCK) or tuple(b_scale.shape) != (n_cols // BLOCK, k_dim // BLOCK):
        raise ValueError("a_scale must be (M, K // 128) and b_scale (N // 128, K // 128)")
    key = (m_rows, n_cols, k_dim)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    y = torch.empty((m_rows, n_cols), dtype=torch.bfloat16)
    _compiled[key](a.contiguous().view(torch.uint8), a_scale.contiguous(), b.contiguous().view(torch.uint8),
                   b_scale.contiguous(), y)
    return y
