"""A warm template that checker processes are forked from: `python -m mkb_ray.checker.checker_template
--control-fd N`.

Why: a checker spawned fresh pays for an interpreter and `import torch` (~1.5 s of CPU on 2 cores) before it can
start its kernel process; a checker forked from a process that already holds those imports pays milliseconds.
`mkb problems validate` starts four checkers a problem, so this is most of what judging costs on a small machine.

What the template is (the trust argument, also in problems/CONTRACT.md, "Trust model"):
- it is trusted code only: it imports what a checker imports (torch, the pipeline, the kernel-process handle) and
  then does nothing but wait on its control socket. It never receives a judging request, a problem or a kernel
  path, never starts a kernel process and never runs candidate code, so a fork of it holds nothing a spawned
  checker would not;
- each fork becomes exactly one checker (`checker.__main__.main`) that serves one submission, as a spawned
  one does: its own session, its own stdin, log, result and warm pipes (passed over the control socket), its own
  scratch directory and environment. The secret schedule is drawn from the OS (`random.SystemRandom`), never
  from a generator state the forks would share;
- a fork dies with the template (`PR_SET_PDEATHSIG`), and the template with the thread that started it, so a
  judging process that dies leaves no checker behind. Forks stay unreaped until the parent asks (`wait`), so
  the process group the parent kills can never be a reused pid's;
- CPU only: a CUDA context does not survive `fork`, so on a GPU host checkers are spawned (the parent decides;
  `mkb_ray.judge.process`). The template never touches CUDA.

Control protocol (a SOCK_SEQPACKET socket, one JSON message per packet):
    {"op": "fork", "argv": [...], "env": {...}, "cwd": str} + 4 fds (stdin, log, result, warm), and optionally
        the 6 of a kernel process forked for this checker (and 6 of a baseline process)  ->  {"pid": int}
    {"op": "wait", "pid": int}  ->  {"returncode": int}
The template says {"ready": true} once its imports are done, and exits when the socket closes.
"""
from __future__ import annotations

import ctypes
import fcntl
import json
import os
import signal
import socket
import sys
import traceback

# Where the four passed descriptors land in a fork: what `checker.__main__` is told to use. A fork may be
# passed a kernel process forked for it too (`ForkedChannels`, six more): those land from KERNEL_FIRST_FD on.
STDIN_FD, LOG_FD, RESULT_FD, WARM_FD = 0, 1, 3, 4
PASSED_FDS = 4
KERNEL_FIRST_FD, KERNEL_FDS = 5, 6
FORKED_PROCESSES = 2  # the kernel process and, on a CPU pool, the baseline process (six more from 11 on)
MAX_MESSAGE_BYTES = 1 << 20
PR_SET_PDEATHSIG = 1


def _exit_status(status: int) -> int:
    """A wait status as Popen reports it: the exit code, or minus the signal that ended the process."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _become_checker(template_pid: int, fds: list[int], request: dict) -> None:
    """In the fork: take the passed descriptors at fixed numbers, drop everything else of the template's, and run
    the checker's main. Never returns."""
    try:
        os.setsid()
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != template_pid:  # the template ended before the line above took effect
            os._exit(1)
        # Copies above every number used below first, so no passed fd is overwritten before it is copied.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, KERNEL_FIRST_FD + FORKED_PROCESSES * KERNEL_FDS) for fd in fds]
        os.dup2(high[0], STDIN_FD)
        os.dup2(high[1], LOG_FD)
        os.dup2(high[1], 2)
        os.dup2(high[2], RESULT_FD)
        os.dup2(high[3], WARM_FD)
        for number, fd in enumerate(high[PASSED_FDS:], start=KERNEL_FIRST_FD):
            os.dup2(fd, number)
        os.closerange(WARM_FD + 1 + len(high) - PASSED_FDS, os.sysconf("SC_OPEN_MAX"))
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [sys.argv[0], *request["argv"]]
        from .__main__ import main

        code = main()
    except SystemExit as ended:
        code = ended.code if isinstance(ended.code, int) else 1
    except BaseException:  # noqa: BLE001 - a checker that fails to start says why in its log and exits non-zero
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code or 0)


def serve(control: socket.socket) -> None:
    template_pid = os.getpid()
    while True:
        try:
            raw, fds, _flags, _address = socket.recv_fds(control, MAX_MESSAGE_BYTES,
                                                         PASSED_FDS + FORKED_PROCESSES * KERNEL_FDS)
        except (ConnectionResetError, OSError):
            return
        if not raw:  # the parent closed the socket: no more checkers from this template
            return
        request = json.loads(raw)
        if request.get("op") == "fork":
            if len(fds) not in [PASSED_FDS + n * KERNEL_FDS for n in range(FORKED_PROCESSES + 1)]:
                for fd in fds:
                    os.close(fd)
                control.send(json.dumps({"error": f"fork needs {PASSED_FDS} descriptors (and {KERNEL_FDS} more per "
                                                  f"forked process, at most {FORKED_PROCESSES}), got {len(fds)}"}
                                        ).encode())
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                control.close()
                _become_checker(template_pid, fds, request)
            for fd in fds:
                os.close(fd)
            control.send(json.dumps({"pid": pid}).encode())
        elif request.get("op") == "wait":
            try:
                _, status = os.waitpid(int(request["pid"]), 0)
                answer = {"returncode": _exit_status(status)}
            except ChildProcessError:
                answer = {"error": f"no child {request['pid']}"}
            control.send(json.dumps(answer).encode())
        else:
            control.send(json.dumps({"error": f"unknown op {request.get('op')!r}"}).encode())


def main() -> int:
    control = socket.socket(fileno=int(sys.argv[sys.argv.index("--control-fd") + 1]))
    # What a checker imports before it is warm (checker.__main__), imported once here for every fork.
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    import torch

    from ..kernel_runner.evidence import cpu_profiler
    from . import screens  # noqa: F401
    from .kernel_process import KernelProcess  # noqa: F401
    from .pipeline import run  # noqa: F401
    from .session import READY_TIMEOUT_S  # noqa: F401

    # The profiler's lazy imports (~0.8 s) once here, not in every fork: a CPU-target judgement profiles the
    # reference for the eager-compute yardstick (pipeline.Judge.reference_per_call).
    with cpu_profiler():
        torch.ones(1).add_(1)

    control.send(json.dumps({"ready": True}).encode())
    serve(control)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
