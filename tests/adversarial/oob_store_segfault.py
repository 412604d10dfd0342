# mkb-adversarial: dsl=tirx device=cpu expect=crash
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: a TIRx CPU kernel stores far outside its output buffer (row 2**34, int64 index), killing the process with SIGSEGV
# must be rejected because: a worker that dies before answering is itself the verdict: crash (with the signal)
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}
WILD_ROW = 1 << 34  # 16 Gi rows * 1 KiB: 16 TiB past the buffer, beyond the user address space


def _build(tokens: int, hidden: int):
    @T.prim_func
    def wild(y_ptr: T.handle):
        Y = T.match_buffer(y_ptr, (tokens, hidden), "bfloat16")
        for j in T.serial(hidden):
            Y[T.int64(WILD_ROW), j] = T.bfloat16(1)  # int64, so the offset does not wrap to row 0

    return tvm.compile(tvm.IRModule({"main": wild}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x, residual, weight):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    out = torch.empty_like(x)
    _compiled[key](out)
    return out, out
