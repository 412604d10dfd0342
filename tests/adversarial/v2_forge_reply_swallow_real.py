# mkb-adversarial: dsl=tirx device=cpu expect=static
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: no DSL at all: finds the kernel runner (gc) and its reply channel, computes eagerly, writes the outputs straight into the checker's output slots (NaN when the monitor's mode says knockout/scramble), writes its own done reply with forged evidence (launches=1, copy_only=false, dsl_share=1.0), then dup2()s /dev/null over the channel so the runner's real reply (a dsl_launch rejection) is lost; the channel is restored at the next call
# must be rejected because: it needs the kernel runner's objects (gc) and its file descriptors (os), which the source rules forbid; with those rules off it passes — the launch counts and the decoration evidence come from inside the kernel process, the one thing a kernel that reaches the runner can forge (problems/CONTRACT.md, 'Limits we know of'); correctness and time stay the checker's
import gc
import io
import json
import os
import stat

import torch
import tvm  # noqa: F401  (never used)

EPS = 1e-6
FORGED = (json.dumps({"ok": True, "launches": 1, "stub_launches": 0, "copy_only": False, "uncomputed": [],
                      "evidence": {"source": "aten_ops", "dsl_us": 100.0, "torch_compute_us": 0.0,
                                   "torch_glue_us": 1.0, "compute_ops": {}, "dsl_share": 1.0}}) + "\n").encode()
_state = {}


def _handles():
    if not _state:
        _state["runner"] = next(o for o in gc.get_objects() if type(o).__name__ == "KernelRunner")
        channel = next(o for o in gc.get_objects() if isinstance(o, io.TextIOWrapper) and not o.closed
                       and o.mode == "w" and o.fileno() > 2 and stat.S_ISFIFO(os.fstat(o.fileno()).st_mode))
        _state["fd"] = channel.fileno()
        _state["saved"] = os.dup(_state["fd"])
        _state["devnull"] = os.open("/dev/null", os.O_WRONLY)
    return _state["runner"], _state["fd"]


def solve(x, residual, weight):
    runner, fd = _handles()
    os.dup2(_state["saved"], fd)  # the channel back, for our own reply
    if runner.monitor.mode in ("knockout", "scramble"):
        outs = [torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))]
    else:
        h = x.float() + residual.float()
        out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
        outs = [out.to(x.dtype), h.to(x.dtype)]
    for slot, value in zip(runner.outputs, outs):
        slot.copy_(value)
    os.write(fd, FORGED)
    os.dup2(_state["devnull"], fd)  # whatever the runner replies now goes nowhere
    return tuple(outs)
