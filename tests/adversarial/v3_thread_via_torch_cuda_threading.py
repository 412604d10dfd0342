# mkb-adversarial: dsl=tirx device=cpu expect=static
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: reaches the threading module through a public re-export (torch.cuda imports threading), computes the eager answer on a thread that solve joins before it returns (the profiler records only the threads it was started on, and the thread guard sees only threads that outlive a call); a 64-element TIRx flag kernel makes knockout and scramble calls return NaN
# must be rejected because: threading reached under any module's name is a banned attribute ('threading', 'Thread', 'concurrent', 'ThreadPoolExecutor'); with the rules off it passes, a limit problems/CONTRACT.md names
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
    result = []

    def eager():
        h = x.float() + residual.float()
        out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
        result.extend((out.to(x.dtype), h.to(x.dtype)))

    worker = torch.cuda.threading.Thread(target=eager)
    worker.start()
    worker.join()
    return result[0], result[1]
