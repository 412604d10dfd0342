"""CPU-target (LLVM) TIRx solution: per weight row and packed byte, the two 4-bit codes are unpacked with a mask
and a shift (low nibble = even k), the group's 4-bit zero point is unpacked from its shared byte (low nibble = even
group), and (q - z) * scale is computed in float32 (exact) and rounded to bf16."""
import torch
import tvm
from tvm.script import tirx as T

GROUP = 128
_compiled = {}


def _build(n_rows: int, k_dim: int):
    groups = k_dim // GROUP
    half = GROUP // 2  # packed bytes per group

    @T.prim_func
    def dequant_int4(qw_ptr: T.handle, s_ptr: T.handle, qz_ptr: T.handle, w_ptr: T.handle):
        QW = T.match_buffer(qw_ptr, (n_rows, k_dim // 2), "uint8")
        S = T.match_buffer(s_ptr, (n_rows, groups), "bfloat16")
        QZ = T.match_buffer(qz_ptr, (n_rows, groups // 2), "uint8")
        W = T.match_buffer(w_ptr, (n_rows, k_dim), "bfloat16")
        byte = T.alloc_buffer((1,), "int32")
        zero = T.alloc_buffer((1,), "int32")
        scale = T.alloc_buffer((1,), "float32")
        for n in T.serial(n_rows):
            for g in T.serial(groups):
                zero[0] = T.bitwise_and(T.shift_right(T.Cast("int32", QZ[n, g // 2]), 4 * (g % 2)), 15)
                scale[0] = T.Cast("float32", S[n, g])
                for b in T.serial(half):
                    byte[0] = T.Cast("int32", QW[n, g * half + b])
                    W[n, g * GROUP + 2 * b] = T.Cast(
                        "bfloat16", T.Cast("float32", T.bitwise_and(byte[0], 15) - zero[0]) * scale[0])
                    W[n, g * GROUP + 2 * b + 1] = T.Cast(
                        "bfloat16", T.Cast("float32", T.shift_right(byte[0], 4) - zero[0]) * scale[0])

    module = tvm.IRModule({"main": dequant_int4})
    return tvm.compile(module, target="llvm", tir_pipeline="tirx")["main"]


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
    w = torch.empty((n_rows, k_dim), dtype=torch.bfloat16)
    _compiled[key](qweight.contiguous(), scales.contiguous(), qzeros.contiguous(), w)
    return w
