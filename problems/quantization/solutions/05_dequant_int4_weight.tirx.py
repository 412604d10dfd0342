"""GPU (sm_90a) TIRx solution: one CTA of 128 threads per (weight row n, 256-wide K span = two groups); thread tx
owns packed byte tx of the span (coalesced byte loads), unpacks its two 4-bit codes with a mask and a shift (low
nibble = even k), takes the group's 4-bit zero point from the span's shared zero byte (low nibble for the first
group, high nibble for the second), and writes (q - z) * scale, exact in float32, rounded to bf16."""
import torch
import tvm
from tvm.script import tirx as T

GROUP = 128
THREADS = 128   # packed bytes per CTA = 256 k values = two groups = one zero-point byte
_compiled = {}


def _build(n_rows: int, k_dim: int):
    groups = k_dim // GROUP
    spans = k_dim // (2 * GROUP)

    @T.prim_func
    def dequant_int4(qw_ptr: T.handle, s_ptr: T.handle, qz_ptr: T.handle, w_ptr: T.handle):
        QW = T.match_buffer(qw_ptr, (n_rows, k_dim // 2), "uint8")
        S = T.match_buffer(s_ptr, (n_rows, groups), "bfloat16")
        QZ = T.match_buffer(qz_ptr, (n_rows, spans), "uint8")
        W = T.match_buffer(w_ptr, (n_rows, k_dim), "bfloat16")
        T.device_entry()
        sp, n = T.cta_id([spans, n_rows])
        tx = T.thread_id([THREADS])
        half = tx // (GROUP // 2)            # which of the span's two groups
        g = 2 * sp + half
        zero = T.bitwise_and(T.shift_right(T.Cast("int32", QZ[n, sp]), 4 * half), 15)
        scale = T.Cast("float32", S[n, g])
        byte = T.Cast("int32", QW[n, sp * THREADS + tx])
        k0 = sp * (2 * THREADS) + 2 * tx
        W[n, k0] = T.Cast("bfloat16", T.Cast("float32", T.bitwise_and(byte, 15) - zero) * scale)
        W[n, k0 + 1] = T.Cast("bfloat16", T.Cast("float32", T.shift_right(byte, 4) - zero) * scale)

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    module = tvm.IRModule({"main": dequant_int4})
    return tvm.compile(module, target=target, tir_pipeline="tirx")["main"]


def solve(qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor):
    n_rows, k_half = qweight.shape
    k_dim = 2 * k_half
    if qweight.dtype != torch.uint8 or qzeros.dtype != torch.uint8 or scales.dtype != torch.bfloat16:
        raise ValueError("expects uint8 qweight and qzeros, bfloat16 scales")
    if k_dim % (2 * GROUP) != 0:
        raise ValueError(f"K={k_dim} must be a multiple of {2 * GROUP} (zero points are packed two groups a byte)")
    groups = k_dim // GROUP
    if tuple(scales.shape) != (n_rows, groups) or tuple(qzeros.shape) != (n_rows, groups // 2):
        raise ValueError("expects scales (N, K // 128) and qzeros (N, K // 256)")
    key = (n_rows, k_dim)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    w = torch.empty((n_rows, k_dim), dtype=torch.bfloat16, device=qweight.device)
    _compiled[key](qweight.contiguous(), scales.contiguous(), qzeros.contiguous(), w)
    return w
