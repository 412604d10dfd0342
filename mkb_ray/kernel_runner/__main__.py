"""Entry point of the kernel process: `python -m mkb_ray.kernel_runner WORKDIR`, started by the checker inside
the OS sandbox (`mkb_ray.checker.sandbox`). Limits come as JSON in `MKB_RUNNER_RLIMITS` and are set, hard,
before anything else runs: the candidate can lower them further, never raise them."""
from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path
from typing import TextIO

_RLIMITS = {"cpu": resource.RLIMIT_CPU, "as": resource.RLIMIT_AS, "fsize": resource.RLIMIT_FSIZE,
            "nofile": resource.RLIMIT_NOFILE, "core": resource.RLIMIT_CORE, "nproc": resource.RLIMIT_NPROC}


KNOWN_DSL_MODULES = ("tvm", "cutlass.cute")  # checker/sandbox.py DSL_MODULES


def apply_rlimits() -> None:
    """The limits the checker named, set hard: the candidate can lower them further, never raise them."""
    for name, value in json.loads(os.environ.get("MKB_RUNNER_RLIMITS", "{}")).items():
        resource.setrlimit(_RLIMITS[name], (int(value), int(value)))


def warm_up() -> None:
    """Import torch and the DSLs this process may be asked for (both unless the checker's pool is for one DSL)
    before a candidate is known; importing either later trips no guard (tests/test_checker_pool.py)."""
    import torch

    for module in filter(None, os.environ.get("MKB_RUNNER_IMPORT_DSLS", "").split(",")):
        if module not in KNOWN_DSL_MODULES:
            print(f"kernel process: not importing unknown DSL module {module!r}", file=sys.stderr)
            continue
        try:
            __import__(module)
        except ImportError as err:
            print(f"kernel process: {module} unavailable ({err})", file=sys.stderr)
    on_gpu = os.environ.get("MKB_RUNNER_DEVICE") == "cuda" and torch.cuda.is_available()
    if on_gpu:
        torch.cuda.init()
        if "tvm" in sys.modules:  # NVRTC's first use in this process, paid before a candidate is known
            from .nvrtc_headers import install_header_cache
            from .warm_compile import warm_tirx_cuda_compile

            if os.environ.get("MKB_RUNNER_NVRTC_PCH", "1") == "1" and not install_header_cache():
                print("kernel process: NVRTC's precompiled header not set up (no cuda.bindings or TVM callback)",
                      file=sys.stderr)
            warm_tirx_cuda_compile()  # also makes the precompiled header the candidate's compile reuses
    if os.environ.get("MKB_RUNNER_PROFILER_WARMUP", "1") == "1":
        # One throw-away profile: the profiler's lazy imports (~900 modules, 0.8 s) rebind torch functions
        # (torch.manual_seed) the first time, which the identity guard would otherwise blame on the candidate.
        # A baseline process runs the reference, never profiled and never guarded, and skips it; so does a kernel
        # process whose calls are never profiled (a GPU kernel where there is no GPU: compile-only).
        import torch.profiler

        if on_gpu:
            activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            with torch.profiler.profile(activities=activities):
                torch.ones(1, device="cuda").add_(1)
        else:
            from .evidence import cpu_profiler

            with cpu_profiler():
                torch.ones(1).add_(1)


def take_protocol_channel() -> TextIO:
    """The reply channel: a copy of fd 1, which then points at the log (stderr), so that whatever is printed from
    here on (an import's chatter, a kernel's print) is only ever log."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return replies


def serve_and_exit(replies: TextIO, workdir: Path) -> None:
    """Answer the checker's requests on stdin, then end without interpreter teardown (DSL runtimes can hang in
    their atexit hooks)."""
    from .runner import serve

    serve(sys.stdin, replies, workdir)
    replies.flush()
    os._exit(0)


def main() -> int:
    apply_rlimits()
    replies = take_protocol_channel()
    warm_up()
    serve_and_exit(replies, Path(sys.argv[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
