"""Entry point of the kernel process: `python -m mkb_ray.kernel_runner WORKDIR`, started by the checker inside
the OS sandbox (`mkb_ray.judge_worker.sandbox`). Limits come as JSON in `MKB_RUNNER_RLIMITS` and are set, hard,
before anything else runs: the candidate can lower them further, never raise them."""
from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path

_RLIMITS = {"cpu": resource.RLIMIT_CPU, "as": resource.RLIMIT_AS, "fsize": resource.RLIMIT_FSIZE,
            "nofile": resource.RLIMIT_NOFILE, "core": resource.RLIMIT_CORE, "nproc": resource.RLIMIT_NPROC}


def main() -> int:
    for name, value in json.loads(os.environ.get("MKB_RUNNER_RLIMITS", "{}")).items():
        resource.setrlimit(_RLIMITS[name], (int(value), int(value)))
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # a kernel's print goes to the log, never onto the protocol channel
    sys.stdout = sys.stderr
    workdir = Path(sys.argv[1])
    # Warm: torch and both DSLs imported before a candidate is known (they coexist in one process).
    import torch  # noqa: F401

    # A baseline process (the reference only) skips them.
    dsls = ("tvm", "cutlass.cute") if os.environ.get("MKB_RUNNER_IMPORT_DSLS", "1") == "1" else ()
    for module in dsls:
        try:
            __import__(module)
        except ImportError as err:
            print(f"kernel process: {module} unavailable ({err})", file=sys.stderr)
    on_gpu = os.environ.get("MKB_RUNNER_DEVICE") == "cuda" and torch.cuda.is_available()
    if on_gpu:
        torch.cuda.init()
    # One throw-away profile: the profiler's lazy imports rebind torch functions (torch.manual_seed) the first
    # time, which the identity guard would otherwise blame on the candidate.
    import torch.profiler

    if on_gpu:
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities):
            torch.ones(1, device="cuda").add_(1)
    else:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True):
            torch.ones(1).add_(1)
    from .runner import serve

    serve(sys.stdin, replies, workdir)
    replies.flush()
    os._exit(0)  # DSL runtimes can hang in their atexit hooks


if __name__ == "__main__":
    raise SystemExit(main())
