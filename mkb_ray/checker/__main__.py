"""Entry point of the checker process: `python -m mkb_ray.checker [--device cpu|cuda]`.

Warm start: the checker imports torch and the pipeline and starts its sandboxed kernel process (which imports
torch and the DSLs named by `--dsls`, default both) *before* it is given work, so a pool of spares
(`mkb_ray.judge.process.CheckerPool`) hides both starts. A pool that forks its kernel processes from a template
hands this checker one instead (`--kernel-fds`, `--kernel-staging`).
When both are done it writes one byte, b"w", on the inherited pipe `--warm-fd` and closes it (the pool's sign
that this spare is warm; b"x" if the kernel process failed to start, which the judgement will then report).
Then the parent writes one JSON object to stdin — {"request": {...}, "nonce": str, "result_fd": int,
"mode": "judge" | "screen"} — and closes it. The verdict goes back as {"nonce": ..., "verdict": {...}} on the
inherited pipe `result_fd`, never on stdout. No candidate code ever runs in this process.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from .sandbox import ALL_DSLS

if TYPE_CHECKING:
    from .kernel_process import ForkedChannels

KERNEL_CHANNEL_FDS = 6  # ForkedChannels.fds


def main() -> int:
    # CuTe DSL without a GPU compiles for sm_100a unless told otherwise; our suite's GPU is sm_90a (Hopper). Set
    # here, where the judging processes start (the kernel process inherits it through the sandbox's env).
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    device = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
    warm_fd = int(sys.argv[sys.argv.index("--warm-fd") + 1]) if "--warm-fd" in sys.argv else None
    dsls = tuple(sys.argv[sys.argv.index("--dsls") + 1].split(",")) if "--dsls" in sys.argv else ALL_DSLS
    process = None
    if "--no-kernel-process" not in sys.argv:
        import torch

        from .kernel_process import KernelProcess, Rejected
        from .pipeline import run  # noqa: F401  (imported now, while warming, not on the judgement's clock)
        from .session import READY_TIMEOUT_S

        on_gpu = device == "cuda" and torch.cuda.is_available()
        # A GPU kernel where there is no GPU is compiled, never profiled (compile-only verdict).
        process = KernelProcess(on_gpu, writable=writable_caches(os.environ.get("MKB_PTX_CACHE_DIR")), dsls=dsls,
                                profiled=on_gpu or device == "cpu", forked=_forked_channels())
        try:
            process.wait_ready(READY_TIMEOUT_S)
            started = True
        except Rejected:  # remembered by the process: the judgement reports it
            started = False
        _say_warm(warm_fd, b"w" if started else b"x")
    else:
        _say_warm(warm_fd, b"w")
    message = json.loads(sys.stdin.read())
    sys.stdin.close()
    result = os.fdopen(int(message.pop("result_fd")), "w")
    nonce = message.pop("nonce")
    if message.get("mode") == "screen":
        from .device_lock import DeviceLock
        from .screens import run_screens

        screen_request = dict(message["request"])
        lock_path = screen_request.pop("device_lock", None)
        lock = DeviceLock(lock_path if screen_request.get("device") == "cuda" else None)
        try:
            with lock.shared():  # screens draw on the GPU: never while another judgement times
                verdict = run_screens(**screen_request)
        except Exception as err:  # a broken problem is a finding of the screen, not a crash
            verdict = {"error": f"{type(err).__name__}: {err}"}
    else:
        from .kernel_process import ForkedSpare
        from .pipeline import run
        from .request import JudgeRequest

        request = JudgeRequest.from_json_dict(message["request"])
        if process is None:
            verdict = {"error": "this checker was started without a kernel process"}
        else:
            try:
                verdict = run(request, process, ForkedSpare(_forked_channels("baseline")))
            finally:
                closing = time.perf_counter()
                process.close()  # ends the process and reads its log to the end
                verdict_log = process.log.text()
            verdict["log_tail"] = verdict_log
            # On the evaluation's wall but in no judging phase: the kernel process's end (its CUDA teardown).
            verdict.setdefault("phases_s", {})["close"] = time.perf_counter() - closing
    result.write(json.dumps({"nonce": nonce, "verdict": verdict}, default=str))
    result.close()
    sys.stdout.flush()
    # Skip interpreter teardown: DSL runtimes can hang or crash in their atexit hooks, after the verdict is out.
    os._exit(0)


def _say_warm(fd: "int | None", byte: bytes) -> None:
    if fd is None:
        return
    try:
        os.write(fd, byte)
        os.close(fd)
    except OSError:  # the parent stopped listening: nothing to tell
        pass


def _forked_channels(role: str = "kernel") -> "Optional[ForkedChannels]":
    """A process the pool forked for this checker from its kernel template (`--ROLE-fds FIRST` and
    `--ROLE-staging DIR`: six descriptors from FIRST on, in `ForkedChannels` order), or None. The kernel process
    (role "kernel"; without one the checker starts its own) and, on a CPU pool, the baseline process ("baseline";
    without one the baselines start their own when they are measured)."""
    if f"--{role}-fds" not in sys.argv:
        return None
    from .kernel_process import ForkedChannels

    first = int(sys.argv[sys.argv.index(f"--{role}-fds") + 1])
    staging = Path(sys.argv[sys.argv.index(f"--{role}-staging") + 1])
    return ForkedChannels(*range(first, first + KERNEL_CHANNEL_FDS), staging=staging)


def writable_caches(path: "str | None") -> tuple[str, ...]:
    """The PTX cache (keyed by source hash; it only informs compile_only verdicts) is the one shared directory
    a kernel process may write."""
    if not path:
        return ()
    os.makedirs(path, exist_ok=True)
    os.chmod(path, 0o1777)
    return (path,)


if __name__ == "__main__":
    raise SystemExit(main())
