# mkb-adversarial: dsl=tirx device=cuda expect=decoration
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: eager PyTorch computes the whole answer in float32 on the GPU; the only TIRx kernel casts it to bfloat16 (plus a zero term, so the outputs depend on an input) into the output buffers
# must be rejected because: the device's kernel record shows PyTorch's compute kernels (add, pow, mean, rsqrt, mul)
#   taking more time than the TIRx kernel, which only casts: eager PyTorch did the work
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
THREADS = 256
_compiled = {}


def _build(tokens: int, hidden: int):
    @T.prim_func
    def cast(e_ptr: T.handle, eh_ptr: T.handle, x_ptr: T.handle, y_ptr: T.handle, h_ptr: T.handle):
        E = T.match_buffer(e_ptr, (tokens, hidden), "float32")
        EH = T.match_buffer(eh_ptr, (tokens, hidden), "float32")
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        Y = T.match_buffer(y_ptr, (tokens, hidden), "bfloat16")
        H = T.match_buffer(h_ptr, (tokens, hidden), "bfloat16")
        T.device_entry()
        row, cb = T.cta_id([tokens, hidden // THREADS])
        tx = T.thread_id([THREADS])
        j = cb * THREADS + tx
        Y[row, j] = T.Cast("bfloat16", E[row, j] + T.Cast("float32", X[row, j]) * T.float32(0))
        H[row, j] = T.Cast("bfloat16", EH[row, j])

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": cast}), target=target, tir_pipeline="tirx")["main"]


def solve(x, residual, weight):
    h = x.float() + residual.float()
    rms = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
    out, h_out = torch.empty_like(x), torch.empty_like(x)
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    _compiled[key](rms, h, x, out, h_out)
    return out, h_out
