"""The parent's handle on a kernel-process template (`mkb_ray.kernel_runner.template`): start it in the sandbox,
fork kernel processes from it, hand each to the checker that will use it.

The pool forks a kernel process for a checker before it forks the checker (`CheckerPool.start_checker`): the
kernel's directories are made here (`kids/k<n>/{input,exchange,scratch}`, the template sees `kids` at
/judge/kids), the fork's channels travel to the checker as descriptors, and the pool keeps a pidfd of the fork's
monitor to count its memory against the checker's limit and to kill it with the checker. Thread-safe.
"""
from __future__ import annotations

import json
import logging
import os
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any, Optional

from ..checker.kernel_process import ForkedChannels
from ..kernel_runner.template import KIDS_DIR, MAX_MESSAGE_BYTES, PROBE_KID
from ..checker.sandbox import SandboxLimits, build_argv, prepare_staging, sandbox_env
from .forking import TemplateUnavailable, end_template

logger = logging.getLogger(__name__)
START_TIMEOUT_S = 180.0


class KernelTemplate:
    """One started template for CPU kernel processes importing `dsls`; `close()` ends it once the forks it made
    have ended (a fork dies with its template)."""

    def __init__(self, dsls: tuple[str, ...], profiled: bool, limits: SandboxLimits = SandboxLimits(),
                 writable: tuple[str, ...] = (), preexec_fn: Any = None) -> None:
        self.dsls = dsls
        self.root = Path(tempfile.mkdtemp(prefix="mkb-kernel-template-",
                                          dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
        os.chmod(self.root, 0o755)
        prepare_staging(self.root / "template", on_gpu=False)
        self.kids = self.root / KIDS_DIR
        self.kids.mkdir(mode=0o755)
        os.chmod(self.kids, 0o755)
        prepare_staging(self.kids / PROBE_KID, on_gpu=False)
        # Removed when the template is shut, or at the latest when this process exits (a pool closed at exit
        # leaves the shutting to a thread that exit does not wait for).
        self._remove_root = weakref.finalize(self, shutil.rmtree, str(self.root), True)
        self._lock = threading.Lock()
        self._count = 0
        self._live: list[int] = []  # our pidfds of forks' monitors not yet seen to end
        self._ready = False
        self._closing = False
        self.log = tempfile.TemporaryFile()
        self._control, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        entry = ("mkb_ray.kernel_runner.template", "--control-fd", str(child_end.fileno()))
        self.process = subprocess.Popen(
            build_argv(self.root / "template", False, limits, writable, kids=self.kids, entry=entry),
            pass_fds=(child_end.fileno(),), env=sandbox_env(False, limits, "kernel", dsls, profiled),
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, start_new_session=True,
            preexec_fn=preexec_fn)
        child_end.close()

    def _wait_ready(self) -> None:
        """The template's first message (the caller holds the lock)."""
        if self._ready:
            return
        readable, _, _ = select.select([self._control], [], [], START_TIMEOUT_S)
        raw = self._control.recv(MAX_MESSAGE_BYTES) if readable else b""
        answer = json.loads(raw) if raw else {}
        if answer.get("ready") is not True:
            self.log.seek(0)
            tail = self.log.read().decode(errors="replace")[-2000:]
            raise TemplateUnavailable(f"the kernel-process template did not start: "
                                      f"{answer.get('error') or 'no answer'} {tail}".strip())
        self._ready = True

    def fork(self) -> ForkedChannels:
        """A new kernel process: its channels, for the checker it is handed to."""
        with self._lock:
            if self._closing:
                raise TemplateUnavailable("the kernel-process template is closing")
            self._wait_ready()
            self._count += 1
            kid = f"k{self._count}"
            staging = self.kids / kid
            prepare_staging(staging, on_gpu=False)
            pipes = [os.pipe() for _ in range(5)]  # stdin, stdout, stderr, lifeline, status
            theirs = [pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][0], pipes[4][1]]
            ours = [pipes[0][1], pipes[1][0], pipes[2][0], pipes[3][1], pipes[4][0]]
            try:
                socket.send_fds(self._control, [json.dumps({"op": "fork", "kid": kid}).encode()], theirs)
                raw, fds, _flags, _address = socket.recv_fds(self._control, MAX_MESSAGE_BYTES, 1)
            except OSError as err:
                raw, fds = b"", []
                logger.warning("the kernel-process template is gone: %s", err)
            finally:
                for fd in theirs:
                    os.close(fd)
            if not raw or json.loads(raw).get("ok") is not True or len(fds) != 1:
                for fd in ours + fds:
                    os.close(fd)
                shutil.rmtree(staging, ignore_errors=True)
                raise TemplateUnavailable(f"the kernel-process template refused a fork: {raw[:300]!r}")
            pidfd = fds[0]
            self._live.append(os.dup(pidfd))
            stdin, stdout, stderr, lifeline, status = ours
            return ForkedChannels(stdin, stdout, stderr, pidfd, status, lifeline, staging)

    def alive(self) -> bool:
        return self.process.poll() is None and not self._closing

    def _forget_ended(self) -> None:
        """Drop our pidfds of forks that have ended (the caller holds the lock)."""
        for pidfd in list(self._live):
            if select.select([pidfd], [], [], 0)[0]:
                self._live.remove(pidfd)
                os.close(pidfd)

    def close(self) -> None:
        """No more forks. The template ends once every fork still running has ended (forks die with it)."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            self._forget_ended()
            running = list(self._live)
        if running:
            threading.Thread(target=self._shut_after, args=(running,), daemon=True).start()
        else:
            self._shut()

    def _shut_after(self, running: list[int]) -> None:
        for pidfd in running:
            select.select([pidfd], [], [])
        self._shut()

    def _shut(self) -> None:
        with self._lock:
            for pidfd in self._live:
                os.close(pidfd)
            self._live = []
        self._control.close()
        end_template(self.process)
        self.log.close()
        self._remove_root()


def monitor_pid(pidfd: Optional[int]) -> Optional[int]:
    """The pid of a live fork's monitor, for memory accounting (None once it has ended)."""
    if pidfd is None or select.select([pidfd], [], [], 0)[0]:
        return None
    from ..checker.kernel_process import pidfd_pid

    try:
        pid = pidfd_pid(pidfd)
    except OSError:
        return None
    return pid if pid > 0 else None
