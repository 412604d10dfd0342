# mkb-adversarial: dsl=tirx device=cpu expect=monkey_patch
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: inside solve, type(out).any = (always False) makes the comparison's `finite.any()` short-circuit to a pass; the source rules are skipped
# must be rejected because: the runtime guard snapshots whole torch namespaces (including new entries on torch.Tensor) and sees the patch
# skip-static: true
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}


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
    type(out).any = lambda self, *args, **kwargs: torch.zeros((), dtype=torch.bool)
    return out, h
