"""A warm template that kernel processes are forked from, inside the OS sandbox:
`python -m mkb_ray.kernel_runner.template SANDBOX_ROOT --control-fd N`, started by the parent's `CheckerPool` (CPU
only) through `mkb_ray.judge.kernel_template`.

Why: every judgement needs a fresh kernel process, and a fresh one pays for an interpreter, `import torch` and its
DSL (2-3 s of CPU here); a fork of a process that already holds them pays milliseconds.

The trust argument (also in problems/CONTRACT.md, "How the two processes start"):
- the template is trusted code only. It imports what a kernel process imports before it knows its candidate
  (`warm_up`: torch, the pool's DSL, the profiler's warm-up) and then only forks. It never reads a candidate, an
  exchange buffer or a request, so a fork holds nothing a freshly spawned kernel process would not;
- each fork walls itself off before any candidate code runs (`isolation.py`): its own user, mount, PID, network,
  IPC and UTS namespaces; its own input, exchange and scratch directories mounted where the template's were, every
  sibling's covered by an empty tmpfs, a fresh /tmp and /dev/shm; then, in PID 1 of its namespace (the process
  that serves the checker), a /proc of that namespace alone, every capability dropped, `no_new_privs`, the
  checker's rlimits. It cannot see, name, signal or trace the template or a sibling (other PID namespaces, no
  /proc of theirs), reach their sockets (other network namespace) or open their files (covered, or never
  mounted);
- the fork's first process stays outside the new PID namespace as a monitor: it ends the kernel process when the
  checker's lifeline pipe closes (the checker ended) and reports how it ended on a status pipe (128 + N for a
  signal, as bubblewrap does); both die with the template (`PR_SET_PDEATHSIG`), and the template with its pool.

Control protocol (SOCK_SEQPACKET, one JSON message per packet):
    {"op": "fork", "kid": "k<n>"} + 5 fds (stdin, stdout, stderr, lifeline, status)  ->  {"ok": true} + a pidfd
The template says {"ready": true} once warm and once a probe fork has isolated itself (else {"ready": false,
"error": ...}: this host cannot nest namespaces, and the pool spawns kernel processes instead).
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import select
import signal
import socket
import sys
import traceback
from pathlib import Path

from .__main__ import apply_rlimits, serve_and_exit, take_protocol_channel, warm_up
from .isolation import die_with_parent, drop_privileges, enter_own_namespaces, enter_own_proc

KID_FDS = 5  # stdin, stdout, stderr, lifeline, status
LIFELINE_FD, STATUS_FD = 3, 4
MAX_MESSAGE_BYTES = 1 << 16
KIDS_DIR = "kids"
HOST_PROC_DIR = "hostproc"  # the host's /proc, bound by the sandbox for the template (see isolation.enter_own_proc)
PROBE_KID = "probe"
_KID_NAME = re.compile(r"^k[0-9]{1,12}$")  # the pool's names; the probe is never asked for


def _place(fds: list[int]) -> None:
    """The passed descriptors at 0..len-1, nothing else of the template's left open."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, len(fds) + 1) for fd in fds]
    for number, fd in enumerate(high):
        os.dup2(fd, number)
    os.closerange(len(fds), os.sysconf("SC_OPEN_MAX"))


def _exit_code(status: int) -> int:
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _become_kernel(template_pid: int, fds: list[int], root: Path, kid: str, probe: bool = False) -> None:
    """The fork's first process: isolate, fork the kernel process, watch it. Never returns."""
    code = 1
    try:
        die_with_parent()
        if os.getppid() != template_pid:  # the template ended before the line above took effect
            os._exit(1)
        _place(fds)
        enter_own_namespaces(str(root / KIDS_DIR / kid), str(root), str(root / KIDS_DIR))
        alive_read, alive_write = os.pipe()
        kernel = os.fork()
        if kernel == 0:
            os.close(alive_write)
            _serve_as_kernel(alive_read, root, probe)
        os.close(alive_read)
        null = os.open(os.devnull, os.O_RDWR)
        for number in (0, 1):  # the kernel process's channels are its own; stderr stays for our own failures
            os.dup2(null, number)
        code = _watch(kernel)
    except BaseException:  # noqa: BLE001 - a fork that cannot isolate itself says why in the kernel's log
        traceback.print_exc()
    finally:
        try:
            os.write(STATUS_FD, f"{code}\n".encode())
        except OSError:
            pass
    os._exit(code)


def _watch(kernel: int) -> int:
    """Wait for the kernel process; kill it when the lifeline closes (the checker is gone). Its exit code."""
    pidfd = os.pidfd_open(kernel)
    watching = [pidfd, LIFELINE_FD]
    while True:
        readable, _, _ = select.select(watching, [], [])
        if pidfd in readable:
            break
        if LIFELINE_FD in readable and not os.read(LIFELINE_FD, 64):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            watching = [pidfd]
    _, status = os.waitpid(kernel, 0)
    return _exit_code(status)


def _serve_as_kernel(alive_read: int, root: Path, probe: bool) -> None:
    """PID 1 of the new namespace: drop every privilege, take the checker's limits, serve. Never returns."""
    try:
        die_with_parent()
        if select.select([alive_read], [], [], 0)[0]:  # the monitor ended before the line above took effect
            os._exit(1)
        os.close(alive_read)
        os.close(LIFELINE_FD)
        os.close(STATUS_FD)
        os.setsid()
        enter_own_proc(str(root / HOST_PROC_DIR))
        drop_privileges()
        os.chdir(root / "scratch")
        if probe:
            os._exit(0)
        apply_rlimits()
        sys.stdin = open(0, "r", closefd=False)
        replies = take_protocol_channel()
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        os._exit(1)
    serve_and_exit(replies, root)


def _fork_kid(template_pid: int, control: socket.socket, fds: list[int], root: Path, kid: str,
              probe: bool = False) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        control.close()
        _become_kernel(template_pid, fds, root, kid, probe)
    for fd in set(fds):
        os.close(fd)
    return pid


def _probe(template_pid: int, control: socket.socket, root: Path) -> str:
    """Fork once and let the fork isolate itself and drop its privileges; '' when it worked, else why not. (The
    pool prepared the probe's directories, as it does every kid's.)"""
    log_read, log_write = os.pipe()
    status_read, status_write = os.pipe()
    lifeline_read, lifeline_write = os.pipe()
    null = os.open(os.devnull, os.O_RDWR)
    pid = _fork_kid(template_pid, control, [null, log_write, log_write, lifeline_read, status_write], root,
                    PROBE_KID, probe=True)
    _, status = os.waitpid(pid, 0)
    os.close(lifeline_write)
    os.set_blocking(log_read, False)
    try:
        log = os.read(log_read, 8192).decode(errors="replace")
    except BlockingIOError:
        log = ""
    for fd in (log_read, status_read):
        os.close(fd)
    code = _exit_code(status)
    return "" if code == 0 else (log.strip().splitlines() or [f"exit code {code}"])[-1]


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def serve(control: socket.socket, root: Path) -> None:
    template_pid = os.getpid()
    while True:
        _reap()
        if not select.select([control], [], [], 1.0)[0]:
            continue
        try:
            raw, fds, _flags, _address = socket.recv_fds(control, MAX_MESSAGE_BYTES, KID_FDS)
        except OSError:
            return
        if not raw:  # the pool closed the socket: the forks still running die with us
            return
        request = json.loads(raw)
        kid = str(request.get("kid", ""))
        if request.get("op") != "fork" or len(fds) != KID_FDS or not _KID_NAME.match(kid):
            for fd in fds:
                os.close(fd)
            control.send(json.dumps({"error": f"bad request {request!r} with {len(fds)} descriptors"}).encode())
            continue
        pid = _fork_kid(template_pid, control, fds, root, kid)
        pidfd = os.pidfd_open(pid)
        socket.send_fds(control, [json.dumps({"ok": True}).encode()], [pidfd])
        os.close(pidfd)


def main() -> int:
    root = Path(sys.argv[1])
    control = socket.socket(fileno=int(sys.argv[sys.argv.index("--control-fd") + 1]))
    warm_up()
    why_not = _probe(os.getpid(), control, root)
    control.send(json.dumps({"ready": not why_not, **({"error": why_not} if why_not else {})}).encode())
    if why_not:
        return 1
    serve(control, root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
