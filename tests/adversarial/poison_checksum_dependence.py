# mkb-adversarial: dsl=tirx device=cpu expect=knockout
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: a one-element TIRx "checksum" kernel (0 * x[0]) is added to eagerly computed outputs, so knockout's NaN poison breaks them
# must be rejected because: the outputs depend on the DSL only through a zero term, which survives the scramble knockout (written values permuted)
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}


def _build(n: int):
    @T.prim_func
    def zero_from_input(x_ptr: T.handle, s_ptr: T.handle):
        X = T.match_buffer(x_ptr, (n,), "bfloat16")
        S = T.match_buffer(s_ptr, (1,), "float32")
        S[0] = T.Cast("float32", X[0]) * T.float32(0)

    return tvm.compile(tvm.IRModule({"main": zero_from_input}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x, residual, weight):
    key = x.numel()
    if key not in _compiled:
        _compiled[key] = _build(key)
    zero = torch.ones(1, dtype=torch.float32)  # not empty(): a recycled 0.0 would hide the kernel's write
    _compiled[key](x.reshape(-1), zero)
    h = x.float() + residual.float()
    out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
    # 0 when the kernel ran; NaN when the judge suppressed it and poisoned `zero`: the knockout "fails" as it should.
    return (out + zero).to(x.dtype), (h + zero).to(x.dtype)
