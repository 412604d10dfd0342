# mkb-adversarial: dsl=tirx device=cpu expect=output_type
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: solve launches only a one-element TIRx kernel and returns a tuple subclass whose __iter__/__getitem__ run the real kernel lazily, when the harness unpacks the result (after the call was timed)
# must be rejected because: solve must return a plain tuple/list/Tensor; a container subclass could compute (or change) its items after the call
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}


class LazyOutputs(tuple):
    def __iter__(self):
        yield from self._compute()

    def __getitem__(self, index):
        return self._compute()[index]

    def _compute(self):
        if not self.done:
            x, residual, weight = self.args
            out, h = torch.empty_like(x), torch.empty_like(x)
            _kernel(x)(x, residual, weight, out, h)
            self.done = [out, h]
        return self.done


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


def _flag_kernel():
    if "flag" not in _compiled:
        @T.prim_func
        def flag(f_ptr: T.handle):
            F = T.match_buffer(f_ptr, (1,), "float32")
            F[0] = T.float32(1)

        _compiled["flag"] = tvm.compile(tvm.IRModule({"main": flag}), target="llvm", tir_pipeline="tirx")["main"]
    return _compiled["flag"]


def solve(x, residual, weight):
    _flag_kernel()(torch.zeros(1))  # the launch the call "needs"
    placeholder = torch.empty_like(x)
    result = LazyOutputs((placeholder, placeholder))
    result.args, result.done = (x, residual, weight), None
    return result
