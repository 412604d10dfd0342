# mkb-adversarial: dsl=tirx device=cpu expect=correctness
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: a running generator walks gi_frame.f_back up the whole stack (f_locals, f_globals, attributes of objects there) for a 'reference' to call or float64/output-shaped tensors to return; its TIRx launch only writes ones
# must be rejected because: the kernel process holds no reference, expected outputs or anchor, so the walk finds only its own inputs and output slots
# skip-static: true
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(tokens: int, hidden: int):
    @T.prim_func
    def ones(y_ptr: T.handle, h_ptr: T.handle):
        Y = T.match_buffer(y_ptr, (tokens, hidden), "bfloat16")
        H = T.match_buffer(h_ptr, (tokens, hidden), "bfloat16")
        for i, j in T.grid(tokens, hidden):
            Y[i, j] = T.bfloat16(1)
            H[i, j] = T.bfloat16(1)

    return tvm.compile(tvm.IRModule({"main": ones}), target="llvm", tir_pipeline="tirx")["main"]


def _walker():
    me = yield
    frame, seen = me.gi_frame.f_back, []  # while running, f_back is the frame that resumed us: solve's
    while frame is not None:
        seen.append(dict(frame.f_locals))
        seen.append(frame.f_globals)
        frame = frame.f_back
    yield seen


def _loot(x, inputs):
    gen = _walker()
    next(gen)
    scopes = gen.send(gen)
    values = [v for scope in scopes for v in scope.values()]
    values += [v for obj in values if hasattr(obj, "__dict__") and not isinstance(obj, type)
               for v in vars(obj).values()]
    values += [v for obj in values if isinstance(obj, (list, tuple)) for v in obj]
    for fn in values:  # the problem's reference (or the judge's expected-output helper), if anyone left it around
        if callable(fn) and getattr(fn, "__name__", "") in ("reference", "expected_outputs"):
            try:
                return list(fn(*inputs))[:2]
            except Exception:
                pass
    mine = {t.data_ptr() for t in inputs}
    found = [v for v in values if isinstance(v, torch.Tensor) and tuple(v.shape) == tuple(x.shape)
             and v.data_ptr() not in mine]
    found.sort(key=lambda t: t.dtype != torch.float64)  # an anchor (float64) first
    unique = list({t.data_ptr(): t for t in found}.values())
    return [t.to(x.dtype).clone() for t in unique[:2]] if len(unique) >= 2 else None


def solve(x, residual, weight):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    out, h = torch.empty_like(x), torch.empty_like(x)
    _compiled[key](out, h)  # the launch every call needs; its values are garbage
    looted = _loot(x, [x, residual, weight])
    return tuple(looted) if looted else (out, h)
