# mkb-adversarial: dsl=tirx device=cuda expect=decoration
# problem: mlp_norm/13_down_proj_residual_gemm
# hack: eager torch.matmul does the GEMM (a cuBLAS kernel, not named after ATen); a TIRx kernel adds the residual
# must be rejected because: the device record puts the GEMM kernel under the aten operator that launched it, so it
#   is PyTorch's work however it is named; the TIRx epilogue is a sliver of the device time
import torch
import tvm
from tvm.script import tirx as T

THREADS = 256
_compiled = {}


def _build(tokens: int, hidden: int):
    @T.prim_func
    def epilogue(a_ptr: T.handle, r_ptr: T.handle, o_ptr: T.handle):
        A = T.match_buffer(a_ptr, (tokens, hidden), "float32")
        R = T.match_buffer(r_ptr, (tokens, hidden), "bfloat16")
        O = T.match_buffer(o_ptr, (tokens, hidden), "bfloat16")
        T.device_entry()
        row, cb = T.cta_id([tokens, hidden // THREADS])
        tx = T.thread_id([THREADS])
        O[row, cb * THREADS + tx] = T.Cast("bfloat16", T.Cast("float32", R[row, cb * THREADS + tx])
                                           + A[row, cb * THREADS + tx])

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": epilogue}), target=target, tir_pipeline="tirx")["main"]


def solve(h, w_down, residual):
    acc = torch.matmul(h.float(), w_down.float().t())  # the work, in cuBLAS
    out = torch.empty_like(residual)
    key = tuple(acc.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    _compiled[key](acc, residual, out)
    return out
