# mkb-adversarial: dsl=tirx device=cpu expect=decoration
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: eager PyTorch computes the whole answer (in float64); the TIRx launch casts it into the outputs and then spins in a loop of useless arithmetic long enough to own most of each profiled call, so the DSL's share of the profiled time clears the bar
# must be rejected because: eager PyTorch's compute in the profiled calls is as large as the reference's own compute at the same shapes (a yardstick the kernel cannot inflate), whatever the DSL's share of the time
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
SPIN = 20  # iterations per element: the launch's time is mostly this loop
_compiled = {}


def _build(tokens: int, hidden: int):
    @T.prim_func
    def cast(e_ptr: T.handle, eh_ptr: T.handle, x_ptr: T.handle, y_ptr: T.handle, h_ptr: T.handle, s_ptr: T.handle):
        E = T.match_buffer(e_ptr, (tokens, hidden), "float32")
        EH = T.match_buffer(eh_ptr, (tokens, hidden), "float32")
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        Y = T.match_buffer(y_ptr, (tokens, hidden), "bfloat16")
        H = T.match_buffer(h_ptr, (tokens, hidden), "bfloat16")
        S = T.match_buffer(s_ptr, (1,), "float32")
        acc = T.alloc_buffer((1,), "float32")
        acc[0] = T.float32(1)
        for k in T.serial(SPIN * tokens * hidden):  # wasted time, so the launch outlasts the eager compute
            acc[0] = acc[0] * T.float32(0.9999999) + E[k // hidden % tokens, k % hidden] * T.float32(1e-30)
        S[0] = acc[0]
        for i, j in T.grid(tokens, hidden):
            Y[i, j] = T.Cast("bfloat16", E[i, j] + T.Cast("float32", X[i, j]) * T.float32(0))
            H[i, j] = T.Cast("bfloat16", EH[i, j])

    return tvm.compile(tvm.IRModule({"main": cast}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x, residual, weight):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    h = x.double() + residual.double()  # in float64: more accurate than the reference, and every bit eager
    rms = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.double()).float()
    h = h.float()
    out, h_out, scratch = torch.empty_like(x), torch.empty_like(x), torch.empty(1)
    _compiled[key](rms, h, x, out, h_out, scratch)
    return out, h_out
