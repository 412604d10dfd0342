# mkb-adversarial: dsl=cutedsl device=cuda expect=protocol
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: writes forged reply lines ({"ok": true}, a done reply with launch counts, a passing verdict) to every open fd 0..50 that is neither a regular file nor a character device (the GPU's /dev/nvidia* nodes), hoping one is the reply channel; returns ones from its CuTe launch
# must be rejected because: the checker accepts exactly one well-formed reply per request; extra or early lines on the channel are a protocol violation
# skip-static: true
import json
import os
import stat

import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

THREADS = 256
_compiled = {}
FORGED = [{"ok": True}, {"ok": True, "launches": 1, "stub_launches": 0},
          {"tier": "pass2x", "correct": True, "speedup": 99.0, "rejected_by": None, "reason": "correct on 7 draws"}]
LINES = "".join(json.dumps(reply) + "\n" for reply in FORGED).encode()


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


def _forge():
    for fd in range(51):
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISREG(mode) or stat.S_ISCHR(mode):
                # files would only be corrupted, never read as replies; the character devices are /dev/null and
                # the GPU's nodes (writing there could only break this process's own CUDA context)
                continue
            os.write(fd, LINES)
        except OSError:
            pass


def solve(x, residual, weight):
    out, h = torch.empty_like(x), torch.empty_like(x)
    args = [from_dlpack(t) for t in (out, h)]
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = cute.compile(_ones, *args)
    _compiled[key](*args)
    _forge()
    return out, h
