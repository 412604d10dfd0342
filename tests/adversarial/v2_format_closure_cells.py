# mkb-adversarial: dsl=tirx device=cpu expect=correctness
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: str.format field access (getattr/getitem the source rules never see) walks the compiled kernel's __closure__ cells and torch.sys.modules for a reference or output-shaped tensors, parses their printed values back into tensors and returns them; the TIRx launch only writes ones
# must be rejected because: the kernel process holds no reference, expected outputs or anchor; the cells lead only to its own launch records
# skip-static: true
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}
# Field paths: the kernel closure's cells (executes, kernel, monitor) and the module table reached through torch.
PATHS = ["{0.__closure__[2].cell_contents.current.computed}", "{0.__closure__[2].cell_contents._dlpack_sources}",
         "{1.sys.modules[mkb_problem].reference}", "{1.sys.modules[__main__].expected}",
         "{1.sys.modules[mkb_ray.checker.pipeline].expected}"]


def _build(tokens: int, hidden: int):
    @T.prim_func
    def ones(y_ptr: T.handle, h_ptr: T.handle):
        Y = T.match_buffer(y_ptr, (tokens, hidden), "bfloat16")
        H = T.match_buffer(h_ptr, (tokens, hidden), "bfloat16")
        for i, j in T.grid(tokens, hidden):
            Y[i, j] = T.bfloat16(1)
            H[i, j] = T.bfloat16(1)

    return tvm.compile(tvm.IRModule({"main": ones}), target="llvm", tir_pipeline="tirx")["main"]


def _numbers(text):
    for mark in "[](),=\n":
        text = text.replace(mark, " ")
    values = []
    for token in text.split():
        try:
            values.append(float(token))
        except ValueError:
            pass
    return values


def _loot(kernel, shape):
    need = shape[0] * shape[1]
    found = []
    torch.set_printoptions(threshold=10**9, precision=10)
    for path in PATHS:
        try:
            text = path.format(kernel, torch)
        except (AttributeError, KeyError, IndexError, TypeError, ValueError):
            continue
        values = _numbers(text)
        found += [values[k:k + need] for k in range(0, len(values) - need + 1, need)]
    torch.set_printoptions(profile="default")
    return found if len(found) >= 2 else None


def solve(x, residual, weight):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    kernel = _compiled[key]
    out, h = torch.empty_like(x), torch.empty_like(x)
    kernel(out, h)
    looted = _loot(kernel, key)
    if looted:
        return tuple(torch.tensor(v, dtype=torch.float64).view(key).to(x.dtype) for v in looted[-2:])
    return out, h
