# mkb-adversarial: dsl=tirx device=cpu expect=decoration
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: eager PyTorch computes the whole answer in float32; the only TIRx kernel casts it to bfloat16 (plus a zero term) into the output buffers, so the outputs are DSL-written, not copies of an input, and fail under knockout and scramble
# must be rejected because: the profiler shows PyTorch compute ops (add, pow, mean, rsqrt, mul) taking more time than the DSL launches, which only cast: eager PyTorch did the work
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}


def _build(tokens: int, hidden: int):
    @T.prim_func
    def cast(e_ptr: T.handle, eh_ptr: T.handle, x_ptr: T.handle, y_ptr: T.handle, h_ptr: T.handle):
        E = T.match_buffer(e_ptr, (tokens, hidden), "float32")
        EH = T.match_buffer(eh_ptr, (tokens, hidden), "float32")
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        Y = T.match_buffer(y_ptr, (tokens, hidden), "bfloat16")
        H = T.match_buffer(h_ptr, (tokens, hidden), "bfloat16")
        for i, j in T.grid(tokens, hidden):
            Y[i, j] = T.Cast("bfloat16", E[i, j] + T.Cast("float32", X[i, j]) * T.float32(0))
            H[i, j] = T.Cast("bfloat16", EH[i, j])

    return tvm.compile(tvm.IRModule({"main": cast}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x, residual, weight):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    h = x.float() + residual.float()
    rms = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
    out, h_out = torch.empty_like(x), torch.empty_like(x)
    _compiled[key](rms, h, x, out, h_out)
    return out, h_out
