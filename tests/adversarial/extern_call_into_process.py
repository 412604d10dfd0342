# mkb-adversarial: dsl=tirx device=cpu expect=compile
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: TIRx host code uses T.call_extern to call libc system() (the same route reaches the Python C API)
# must be rejected because: the compiled host code may call only LLVM intrinsics, libm and the TVM runtime; other external symbols are refused
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}


def _build(tokens: int, hidden: int):
    @T.prim_func
    def main(x_ptr: T.handle, y_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        Y = T.match_buffer(y_ptr, (tokens, hidden), "bfloat16")
        T.evaluate(T.call_extern("int32", "system", "echo escaped the judge"))
        for i, j in T.grid(tokens, hidden):
            Y[i, j] = X[i, j]

    return tvm.compile(tvm.IRModule({"main": main}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x, residual, weight):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    out = torch.empty_like(x)
    _compiled[key](x, out)
    return out, out
