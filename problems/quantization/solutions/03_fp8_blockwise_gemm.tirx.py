"""GPU (sm_90a) TIRx solution: one CTA of 128 threads per (row m, 128-column block nb of the output), one output
element per thread (n = nb * 128 + tx). For every 128-wide K block the thread accumulates the block's dot product of
raw fp8 values (converted e4m3fn -> float32) in float32, then scales it by a_scale[m, kb] * b_scale[nb, kb] before
adding it to its float32 accumulator (DeepSeek-V3's scale application inside the K loop); A's row is a warp-uniform
broadcast, the weight block's scale is CTA-uniform. The result is rounded to bf16."""
import torch
import tvm
from tvm.script import tirx as T

BLOCK = 128
_compiled = {}


def _build(m_rows: int, n_cols: int, k_dim: int):
    kb_n = k_dim // BLOCK
    nb_n = n_cols // BLOCK

    @T.prim_func
    def fp8_block_gemm(a_ptr: T.handle, as_ptr: T.handle, b_ptr: T.handle, bs_ptr: T.handle, y_ptr: T.handle):
        A = T.match_buffer(a_ptr, (m_rows, k_dim), "float8_e4m3fn")
        AS = T.match_buffer(as_ptr, (m_rows, kb_n), "float32")
        B = T.match_buffer(b_ptr, (n_cols, k_dim), "float8_e4m3fn")
        BS = T.match_buffer(bs_ptr, (nb_n, kb_n), "float32")
        Y = T.match_buffer(y_ptr, (m_rows, n_cols), "bfloat16")
        T.device_entry()
        nb, i = T.cta_id([nb_n, m_rows])
        tx = T.thread_id([BLOCK])
        j = nb * BLOCK + tx
        acc = T.alloc_local((1,), "float32")
        part = T.alloc_local((1,), "float32")
        acc[0] = T.float32(0)
        for kb in T.serial(kb_n):
            part[0] = T.float32(0)
            for kk in T.serial(BLOCK):
                part[0] = part[0] + T.Cast("float32", A[i, kb * BLOCK + kk]) * T.Cast("float32", B[j, kb * BLOCK + kk])
            acc[0] = acc[0] + part[0] * (AS[i, kb] * BS[nb, kb])
        Y[i, j] = T.Cast("bfloat16", acc[0])

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    module = tvm.IRModule({"main": fp8_block_gemm})
    return tvm.compile(module, target=target, tir_pipeline="tirx")["main"]


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
    y = torch.empty((m_rows, n_cols), dtype=torch.bfloat16, device=a.device)
    _compiled[key](a.contiguous(), a_scale.contiguous(), b.contiguous(), b_scale.contiguous(), y)
    return y
