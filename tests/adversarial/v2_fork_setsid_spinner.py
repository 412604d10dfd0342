# mkb-adversarial: dsl=tirx device=cpu expect=correctness
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: on its first call forks a child that calls os.setsid() (leaving the kernel process's session and process group) and spins forever, stealing CPU from whatever is timed next (the eager baseline); the parent returns the honest TIRx kernel's result
# must be rejected because: containment — the spinner must die with the kernel process (its PID namespace); whether it also skews the baselines is checked by a separate test. The header's check is nominal: the outputs are correct
# skip-static: true
import os

import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}
_forked = []


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


def _spawn_spinner():
    pid = os.fork()
    if pid == 0:  # the child: never returns into the kernel process's loop
        try:
            os.setsid()
            while True:
                pass
        finally:
            os._exit(0)
    _forked.append(pid)


def solve(x, residual, weight):
    if not _forked:
        _spawn_spinner()
    out, h = torch.empty_like(x), torch.empty_like(x)
    _kernel(x)(x, residual, weight, out, h)
    return out, h
