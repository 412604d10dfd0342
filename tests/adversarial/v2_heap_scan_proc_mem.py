# mkb-adversarial: dsl=tirx device=cpu expect=correctness
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: reads /proc/self/maps and scans every writable mapping through /proc/self/mem (numpy views of the bytes) for float64 copies of the answer, recognised by rows 0 and 1 (h = x + residual is exact in float64; rmsnorm of two rows is cheap) and returns them; the TIRx launch only writes ones
# must be rejected because: the anchor and the expected outputs live only in the checker's process, whose memory the kernel process cannot map or read
# skip-static: true
import os

import numpy as np
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
CHUNK = 64 << 20
BUDGET = 3 << 30  # bytes scanned per call at most
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
            except OSError:
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
    rows = x[:2].double() + residual[:2].double()  # exact: what the anchor's h must hold
    rms = rows * torch.rsqrt(rows.pow(2).mean(-1, keepdim=True) + EPS) * weight.double()
    h, out = rows[:, :4].numpy().copy(), rms[:, :4].numpy().copy()
    del rows, rms
    mem = os.open("/proc/self/mem", os.O_RDONLY)
    try:
        found = [_find(mem, regions, probe, hidden, 8 * n) for probe in (out, h)]
        if None in found:
            return None
        return [torch.from_numpy(np.frombuffer(os.pread(mem, 8 * n, a), dtype=np.float64).copy()).view(x.shape)
                .to(x.dtype) for a in found]
    finally:
        os.close(mem)


def solve(x, residual, weight):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    out, h = torch.empty_like(x), torch.empty_like(x)
    _compiled[key](out, h)
    looted = _scan(x, residual, weight)
    return tuple(looted) if looted else (out, h)
