# mkb-adversarial: dsl=tirx device=cpu expect=monkey_patch
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: honest TIRx kernel, but the first call pushes a TorchDispatchMode (torch.utils._python_dispatch, allowed by the import rules) that busy-waits on every aten op and never pops it, hoping the eager baseline is timed under it
# must be rejected because: a dispatch mode left pushed after solve is a patch of torch itself; the baseline runs in a separate pristine process anyway (the import of the private module torch.utils._python_dispatch is a source-rule violation since 2026-12-04; judged with the rules off, this is that runtime guard's proof)
# skip-static: true
import torch
import tvm
from torch.utils._python_dispatch import TorchDispatchMode
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}
_held = []


class SlowAten(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        for _ in range(20000):  # ~1 ms of busy waiting per aten op
            pass
        return func(*args, **(kwargs or {}))


def _hold_open():
    with SlowAten():
        yield  # suspended here forever: the mode stays pushed


def _build(tokens: int, hidden: int):
    @T.prim_func
    def rmsnorm(x_ptr: T.handle, r_ptr: T.handle, w_ptr: T.handle, y_ptr: T.handle, h_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        R = T.match_buffer(r_ptr, (tokens, hidden), "bfloat16")
        W = T.match_buffer(w_ptr, (hidden,), "bfloat16")
        Y = T.match_buffer(y_ptr, (tokens, hidden), "bfloat16")
        H = T.match_buffer(h_ptr, (tokens, hidden), "bfloat16")
        h = T.alloc_buffer((hidden,), "float32")
        acc = T.alloc_buffer((1,), "float32")
        for i in T.serial(tokens):
            acc[0] = T.float32(0)
            for j in T.serial(hidden):
                h[j] = T.Cast("float32", X[i, j]) + T.Cast("float32", R[i, j])
                H[i, j] = T.Cast("bfloat16", h[j])
                acc[0] = acc[0] + h[j] * h[j]
            for j in T.serial(hidden):
                rstd = T.rsqrt(acc[0] / T.float32(hidden) + T.float32(EPS))
                Y[i, j] = T.Cast("bfloat16", h[j] * rstd * T.Cast("float32", W[j]))

    return tvm.compile(tvm.IRModule({"main": rmsnorm}), target="llvm", tir_pipeline="tirx")["main"]


def _kernel(x):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    return _compiled[key]


def solve(x, residual, weight):
    if not _held:
        gen = _hold_open()
        next(gen)
        _held.append(gen)
    out, h = torch.empty_like(x), torch.empty_like(x)
    _kernel(x)(x, residual, weight, out, h)
    return out, h
