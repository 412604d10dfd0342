# mkb-adversarial: dsl=tirx device=cpu expect=monkey_patch
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: honest TIRx kernel, but the first call enters a torch.overrides.TorchFunctionMode that busy-waits on every torch call and never exits it (a suspended generator holds the `with`), hoping the eager baseline is timed under it
# must be rejected because: a torch function mode left pushed after solve is a patch of torch itself; the baseline runs in a separate pristine process anyway
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}
_held = []


class SlowEverything(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        for _ in range(20000):  # ~1 ms of busy waiting per torch call
            pass
        return func(*args, **(kwargs or {}))


def _hold_open():
    with SlowEverything():
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
