# mkb-adversarial: dsl=tirx device=cpu expect=protocol|correctness
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: computes the right answer with the honest TIRx kernel, then writes one extra well-formed done reply to every pipe or socket among fds 0..50 (the reply channel among them), so that the next request is answered at once by a stale reply (a near-zero round trip)
# must be rejected because: a reply the checker did not ask for is a forged or early answer; the channel carries exactly one reply per request; the forged line is taken for the reply, so the checker reads the slots before solve filled them (correctness), or the real reply found waiting before the next request gives it away (protocol)
# skip-static: true
import os
import stat

import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}
EXTRA = b'{"ok": true, "launches": 1, "stub_launches": 0}\n'


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


def _extra_reply():
    for fd in range(51):
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
                os.write(fd, EXTRA)
        except OSError:
            pass


def solve(x, residual, weight):
    out, h = torch.empty_like(x), torch.empty_like(x)
    _kernel(x)(x, residual, weight, out, h)
    _extra_reply()
    return out, h
