"""CPU-target (LLVM) TIRx solution: per output element, an exact int32 dot product of the int8 row of A and the
int8 row of B (int8 x int8 products widened to int32), then the int32 -> float32 epilogue scaled by the token's
scale and the output channel's scale, rounded to bf16."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(m_rows: int, n_cols: int, k_dim: int):
    @T.prim_func
    def w8a8_gemm(a_ptr: T.handle, as_ptr: T.handle, b_ptr: T.handle, bs_ptr: T.handle, y_ptr: T.handle):
        A = T.match_buffer(a_ptr, (m_rows, k_dim), "int8")
        AS = T.match_buffer(as_ptr, (m_rows,), "float32")
        B = T.match_buffer(b_ptr, (n_cols, k_dim), "int8")
        BS = T.match_buffer(bs_ptr, (n_cols,), "float32")
        Y = T.match_buffer(y_ptr, (m_rows, n_cols), "bfloat16")
        acc = T.alloc_buffer((1,), "int32")
        for i in T.serial(m_rows):
            for j in T.serial(n_cols):
                acc[0] = 0
                for k in T.serial(k_dim):
                    acc[0] = acc[0] + T.Cast("int32", A[i, k]) * T.Cast("int32", B[j, k])
                Y[i, j] = T.Cast("bfloat16", T.Cast("float32", acc[0]) * AS[i] * BS[j])

    module = tvm.IRModule({"main": w8a8_gemm})
    return tvm.compile(module, target="llvm", tir_pipeline="tirx")["main"]


def solve(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor):
    m_rows, k_dim = a.shape
    n_cols = b.shape[0]
    if a.dtype != torch.int8 or b.dtype != torch.int8:
        raise ValueError("a and b must be int8")
    if a_scale.dtype != torch.float32 or b_scale.dtype != torch.float32:
        raise ValueError("scales must be float32")
    if b.shape[1] != k_dim or tuple(a_scale.shape) != (m_rows,) or tuple(b_scale.shape) != (n_cols,):
        raise ValueError("expects a (M, K), a_scale (M,), b (N, K), b_scale (N,)")
    key = (m_rows, n_cols, k_dim)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    y = torch.empty((m_rows, n_cols), dtype=torch.bfloat16)
    _compiled[key](a.contiguous(), a_scale.contiguous(), b.contiguous(), b_scale.contiguous(), y)
    return y
