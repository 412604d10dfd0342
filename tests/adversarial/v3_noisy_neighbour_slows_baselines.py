# mkb-adversarial: dsl=tirx device=cpu expect=threads
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: starts a child process through multiprocessing as torch's DataLoader module re-exports it; once the kernel's own calls are over (it counts them) the child busy-spins for seconds, beside the baseline process that times eager PyTorch right after, so eager looks slower and the kernel's speedup larger
# must be rejected because: a process the submission leaves running after a call is seen by the kernel process itself (threads); and the kernel process has ended before the baselines are timed
import torch
import tvm
from torch.utils.data.dataloader import python_multiprocessing as mp
from tvm.script import tirx as T

EPS = 1e-6
CALLS_BEFORE_SPIN = 70  # 1 + 4 correctness + 2 outlier + 3 knockout + 1-3 profiled + 60 timed + audits: about now
SPIN_S = 8.0
_compiled = {}
_calls = [0]
_go = mp.Event()


def _spin(go) -> None:
    go.wait()
    x = 0
    for _ in range(int(SPIN_S * 2e7)):
        x += 1


_child = mp.Process(target=_spin, args=(_go,), daemon=True)
_child.start()
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
    _calls[0] += 1
    if _calls[0] >= CALLS_BEFORE_SPIN:
        _go.set()
    out = torch.zeros_like(x)
    h = torch.zeros_like(x)
    _kernel(x)(x, residual, weight, out, h)
    return out, h
