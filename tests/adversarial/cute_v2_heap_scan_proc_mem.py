# mkb-adversarial: dsl=cutedsl device=cuda expect=correctness
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: reads /proc/self/maps and scans every writable host mapping through /proc/self/mem (numpy views of the bytes) for float64 copies of the answer (a host-side anchor or expected outputs staged for the comparison), recognised by rows 0 and 1 (h = x + residual is exact in float64; rmsnorm of two rows is cheap) and returns them on the GPU; the CuTe launch only writes ones
# must be rejected because: the anchor and the expected outputs live only in the checker's process (its host memory and its own CUDA context), which the kernel process cannot map or read
# skip-static: true
import os

import numpy as np
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

EPS = 1e-6
THREADS = 256
CHUNK = 64 << 20
BUDGET = 3 << 30  # bytes scanned per call at most
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


def _find(mem, regions, probe: np.ndarray, stride: int, nbytes: int):
    """Address of a float64 block whose rows 0 and 1 start with `probe` (2 x 4 values), `nbytes` long."""
    key, row0, row1 = probe[0, :1].view(np.uint64)[0], probe[0].view(np.uint64), probe[1].view(np.uint64)
    scanned = 0
    for start, end in regions:
        for base in range(start, end, CHUNK):
            size = min(CHUNK, end - base)
            scanned += size
            if scanned > BUDGET:
                return None
            try:
                words = np.frombuffer(os.pread(mem, size, base), dtype=np.uint64)
            except OSError:  # device mappings (/dev/nvidia*) and other unreadable ranges
                break
            for hit in np.flatnonzero(words == key):
                if (hit + stride + 4 <= len(words) and np.array_equal(words[hit:hit + 4], row0)
                        and np.array_equal(words[hit + stride:hit + stride + 4], row1)
                        and base + 8 * hit + nbytes <= end):
                    return base + 8 * int(hit)
    return None


def _scan(x, residual, weight):
    with open("/proc/self/maps") as maps:
        regions = [tuple(int(a, 16) for a in line.split()[0].split("-")) for line in maps
                   if line.split()[1].startswith("rw")]
    n, hidden = x.numel(), x.shape[1]
    rows = x[:2].double().cpu() + residual[:2].double().cpu()  # exact: what the anchor's h must hold
    rms = rows * torch.rsqrt(rows.pow(2).mean(-1, keepdim=True) + EPS) * weight.double().cpu()
    h, out = rows[:, :4].numpy().copy(), rms[:, :4].numpy().copy()
    del rows, rms
    mem = os.open("/proc/self/mem", os.O_RDONLY)
    try:
        found = [_find(mem, regions, probe, hidden, 8 * n) for probe in (out, h)]
        if None in found:
            return None
        return [torch.from_numpy(np.frombuffer(os.pread(mem, 8 * n, a), dtype=np.float64).copy()).view(x.shape)
                .to(device=x.device, dtype=x.dtype) for a in found]
    finally:
        os.close(mem)


def solve(x, residual, weight):
    out, h = torch.empty_like(x), torch.empty_like(x)
    args = [from_dlpack(t) for t in (out, h)]
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = cute.compile(_ones, *args)
    _compiled[key](*args)
    looted = _scan(x, residual, weight)
    return tuple(looted) if looted else (out, h)
