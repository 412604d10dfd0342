# mkb-adversarial: dsl=cutedsl device=cuda expect=correctness
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: a running generator walks gi_frame.f_back up the whole stack (f_locals, f_globals, attributes of objects there) for a 'reference' to call or float64/output-shaped tensors to return; its CuTe launch only writes ones
# must be rejected because: the kernel process holds no reference, expected outputs or anchor (they are in the checker's process and its own GPU memory), so the walk finds only its own inputs and output slots
# skip-static: true
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

THREADS = 256
_compiled = {}


@cute.kernel
def _ones_kernel(gY: cute.Tensor, gH: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    row, col_block, _ = cute.arch.block_idx()
    j = col_block * THREADS + tidx
    gY[row, j] = cutlass.Float32(1.0).to(gY.element_type)
    gH[row, j] = cutlass.Float32(1.0).to(gH.element_type)


@cute.jit
def _ones(mY: cute.Tensor, mH: cute.Tensor):
    _ones_kernel(mY, mH).launch(grid=(mY.shape[0], mY.shape[1] // THREADS, 1), block=(THREADS, 1, 1))


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
    return [t.to(device=x.device, dtype=x.dtype).clone() for t in unique[:2]] if len(unique) >= 2 else None


def solve(x, residual, weight):
    out, h = torch.empty_like(x), torch.empty_like(x)
    args = [from_dlpack(t) for t in (out, h)]
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = cute.compile(_ones, *args)
    _compiled[key](*args)  # the launch every call needs; its values are garbage
    looted = _loot(x, [x, residual, weight])
    return tuple(looted) if looted else (out, h)
