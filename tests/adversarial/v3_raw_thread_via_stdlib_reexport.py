# mkb-adversarial: dsl=tirx device=cpu expect=static
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: reaches the raw-thread module through a private name the standard library re-exports (dataclasses imports _thread), computes the eager answer on a raw thread that solve waits for (the profiler records only the threads it was started on; threading.enumerate never lists a raw thread); a 64-element TIRx flag kernel makes knockout and scramble calls return NaN
# must be rejected because: importing a private name is private access, as reading the attribute is (and threading's public re-exports, torch.cuda.threading and the like, are banned attributes); with the rules off it passes, as v2_decoration_hidden_in_raw_thread.py does (problems/CONTRACT.md, 'Limits we know of')
import torch
import tvm
from dataclasses import _thread
from tvm.script import tirx as T

EPS = 1e-6
FLAG = 64
_compiled = {}


def _eager(x, residual, weight, result, done):
    try:
        h = x.float() + residual.float()
        out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
        result.extend((out.to(x.dtype), h.to(x.dtype)))
    finally:
        done.release()


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
    result, done = [], _thread.allocate_lock()
    done.acquire()
    _thread.start_new_thread(_eager, (x, residual, weight, result, done))
    done.acquire()
    return result[0], result[1]
