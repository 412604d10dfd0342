# mkb-adversarial: dsl=tirx device=cpu expect=decoration
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: computes the whole answer eagerly in numpy (an allowed import) on float32 copies, so the call's profiler sees only aten glue (casts and copies) and no PyTorch compute; a 64-element TIRx flag kernel makes knockout and scramble calls return NaN
# must be rejected because: eager host code did the work, not the DSL; the decoration evidence must count compute the profiler does not attribute to aten (numpy here) against the DSL (numpy is not an allowed import since 2026-12-04; judged with the rules off, this proves the runtime evidence for numpy functions, which the profiler's tracer records)
# skip-static: true
import numpy as np
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
FLAG = 64
_compiled = {}


def _flag_kernel():
    if "flag" not in _compiled:
        @T.prim_func
        def flag(f_ptr: T.handle):
            F = T.match_buffer(f_ptr, (FLAG,), "float32")
            for k in T.serial(FLAG):
                F[k] = T.Cast("float32", k)

        _compiled["flag"] = tvm.compile(tvm.IRModule({"main": flag}), target="llvm", tir_pipeline="tirx")["main"]
        _compiled["expect"] = torch.arange(FLAG, dtype=torch.float32)
    return _compiled["flag"]


def solve(x, residual, weight):
    flag = torch.full((FLAG,), -1.0)
    _flag_kernel()(flag)
    if not torch.equal(flag, _compiled["expect"]):  # poisoned or permuted: a knockout call
        return torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    h = x.float().numpy() + residual.float().numpy()
    rstd = 1.0 / np.sqrt(np.mean(h * h, axis=-1, keepdims=True, dtype=np.float32) + np.float32(EPS))
    out = h * rstd * weight.float().numpy()
    return torch.from_numpy(out).to(x.dtype), torch.from_numpy(h).to(x.dtype)
