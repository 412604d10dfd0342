# mkb-adversarial: dsl=tirx device=cpu expect=static
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: patches torch.Tensor.any through an alias (Tensor = torch.Tensor) so the judge's comparison passes anything
# must be rejected because: names bound to module attributes count as the module: assigning their attributes is a module patch
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}
Tensor = torch.Tensor
Tensor.any = lambda self, *args, **kwargs: torch.zeros((), dtype=torch.bool)


def _build(tokens: int, hidden: int):
    @T.prim_func
    def zeros(y_ptr: T.handle, h_ptr: T.handle):
        Y = T.match_buffer(y_ptr, (tokens, hidden), "bfloat16")
        H = T.match_buffer(h_ptr, (tokens, hidden), "bfloat16")
        for i, j in T.grid(tokens, hidden):
            Y[i, j] = T.bfloat16(0)
            H[i, j] = T.bfloat16(0)

    return tvm.compile(tvm.IRModule({"main": zeros}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x, residual, weight):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    out = torch.empty_like(x)
    h = torch.empty_like(x)
    _compiled[key](out, h)
    return out, h
