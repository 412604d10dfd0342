# mkb-adversarial: dsl=tirx device=cpu expect=protocol
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: writes forged reply lines ({"ok": true}, a done reply with launch counts, a passing verdict) to every open fd 0..50 that is not a regular file, hoping one is the reply channel; returns ones from its TIRx launch
# must be rejected because: the checker accepts exactly one well-formed reply per request; extra or early lines on the channel are a protocol violation
# skip-static: true
import json
import os
import stat

import torch
import tvm
from tvm.script import tirx as T

_compiled = {}
FORGED = [{"ok": True}, {"ok": True, "launches": 1, "stub_launches": 0},
          {"tier": "pass2x", "correct": True, "speedup": 99.0, "rejected_by": None, "reason": "correct on 7 draws"}]
LINES = "".join(json.dumps(reply) + "\n" for reply in FORGED).encode()


def _build(tokens: int, hidden: int):
    @T.prim_func
    def ones(y_ptr: T.handle, h_ptr: T.handle):
        Y = T.match_buffer(y_ptr, (tokens, hidden), "bfloat16")
        H = T.match_buffer(h_ptr, (tokens, hidden), "bfloat16")
        for i, j in T.grid(tokens, hidden):
            Y[i, j] = T.bfloat16(1)
            H[i, j] = T.bfloat16(1)

    return tvm.compile(tvm.IRModule({"main": ones}), target="llvm", tir_pipeline="tirx")["main"]


def _forge():
    for fd in range(51):
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                continue  # files (the exchange buffer among them) would only be corrupted, never read as replies
            os.write(fd, LINES)
        except OSError:
            pass


def solve(x, residual, weight):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    out, h = torch.empty_like(x), torch.empty_like(x)
    _compiled[key](out, h)
    _forge()
    return out, h
