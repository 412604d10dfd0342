# mkb-adversarial: dsl=tirx device=cpu expect=static
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: registers a Python function as a TVM global and calls it from the TIRx kernel (T.call_packed): eager torch inside a DSL launch
# must be rejected because: TVM's global-function registry and packed calls are banned by the source rules
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}
_pending = []


@tvm.register_global_func("adv.torch_rmsnorm")
def _torch_rmsnorm():
    x, residual, weight, out, h = _pending.pop()
    hh = x.float() + residual.float()
    h.copy_(hh)
    out.copy_(hh * torch.rsqrt(hh.pow(2).mean(-1, keepdim=True) + EPS) * weight.float())
    return 0


def _build(tokens: int, hidden: int):
    @T.prim_func
    def main(y_ptr: T.handle):
        Y = T.match_buffer(y_ptr, (tokens, hidden), "bfloat16")
        T.evaluate(T.call_packed("adv.torch_rmsnorm"))

    return tvm.compile(tvm.IRModule({"main": main}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x, residual, weight):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    out = torch.empty_like(x)
    h = torch.empty_like(x)
    _pending.append((x, residual, weight, out, h))
    _compiled[key](out)
    return out, h
