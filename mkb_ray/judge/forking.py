"""The parent's handle on a checker template (`mkb_ray.checker.checker_template`): start it, fork checkers
from it, and treat each fork like a `subprocess.Popen` (pid, poll, wait, returncode, stdin).

A fork is not our child, so its end is watched through a pidfd and its exit status is asked of the template,
which keeps every fork unreaped until then (its pid and process group cannot be reused while we may still kill
them). Thread-safe: one request and its reply at a time on the control socket.
"""
from __future__ import annotations

import json
import logging
import os
import select
import socket
import subprocess
import sys
import threading
from typing import IO, Any, Optional

from ..checker.checker_template import KERNEL_FDS, MAX_MESSAGE_BYTES
from ..checker.kernel_process import kill_pidfd

logger = logging.getLogger(__name__)
START_TIMEOUT_S = 120.0


class TemplateUnavailable(RuntimeError):
    """The template died or never started: checkers are spawned instead."""


class CheckerTemplate:
    """One started template; `close()` ends it once every fork it made has been waited for."""

    def __init__(self, env: dict[str, str], preexec_fn: Any = None) -> None:
        self._control, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._lock = threading.Lock()
        self._live: set[int] = set()
        self._closing = False
        self._ready = False
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mkb_ray.checker.checker_template", "--control-fd", str(child_end.fileno())],
            pass_fds=(child_end.fileno(),), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True, preexec_fn=preexec_fn)
        child_end.close()

    def _ask(self, message: dict[str, Any], fds: tuple[int, ...] = ()) -> dict[str, Any]:
        """Send one request and read its reply (the caller holds the lock)."""
        if not self._ready:
            ready, _, _ = select.select([self._control], [], [], START_TIMEOUT_S)
            if not ready or json.loads(self._control.recv(MAX_MESSAGE_BYTES) or b"{}").get("ready") is not True:
                raise TemplateUnavailable("the checker template did not start")
            self._ready = True
        try:
            socket.send_fds(self._control, [json.dumps(message).encode()], list(fds))
            raw = self._control.recv(MAX_MESSAGE_BYTES)
        except OSError as err:
            raise TemplateUnavailable(f"the checker template is gone ({err})") from None
        if not raw:
            raise TemplateUnavailable("the checker template is gone (its socket closed)")
        answer = json.loads(raw)
        if "error" in answer:
            raise TemplateUnavailable(f"the checker template refused: {answer['error']}")
        return answer

    def fork(self, argv: list[str], env: dict[str, str], cwd: str, stdin: int, log: int, result: int,
             warm: int, kernel_fds: tuple[int, ...] = ()) -> "ForkedChild":
        """A new checker running `python -m mkb_ray.checker <argv>` in `cwd` with `env`; the four descriptors
        become its stdin, stdout+stderr, result pipe (fd 3) and warm pipe (fd 4), and `kernel_fds` (a kernel
        process forked for it, and a baseline process after it) fds KERNEL_FIRST_FD on."""
        fds = (stdin, log, result, warm, *kernel_fds)
        assert len(kernel_fds) in (0, KERNEL_FDS, 2 * KERNEL_FDS)
        with self._lock:
            if self._closing:
                raise TemplateUnavailable("the checker template is closing")
            pid = int(self._ask({"op": "fork", "argv": argv, "env": env, "cwd": cwd}, fds)["pid"])
            self._live.add(pid)
        return ForkedChild(pid, self, [sys.executable, "-m", "mkb_ray.checker", *argv])

    def reap(self, pid: int) -> int:
        """The exit status of a fork that has ended (it is a zombie until now); ends a closing template after its
        last fork."""
        with self._lock:
            try:
                code = int(self._ask({"op": "wait", "pid": pid})["returncode"])
            except TemplateUnavailable:
                code = -9  # the template died, and every fork with it (PR_SET_PDEATHSIG)
            self._live.discard(pid)
            if self._closing and not self._live:
                self._shut()
        return code

    def alive(self) -> bool:
        return self.process.poll() is None and not self._closing

    def close(self) -> None:
        """No more forks; the template ends now, or once the forks still running have been waited for."""
        with self._lock:
            self._closing = True
            if not self._live:
                self._shut()

    def _shut(self) -> None:
        self._control.close()
        end_template(self.process)


def end_template(process: subprocess.Popen) -> None:
    """Wait for a template whose control socket we closed (it exits then), or kill it."""
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class ForkedChild:
    """A checker forked from a template, with the part of the `Popen` interface the judge uses."""

    def __init__(self, pid: int, template: CheckerTemplate, args: list[str]) -> None:
        self.pid, self._template = pid, template
        self.args = args  # the command line it runs as, as Popen.args says (the fork does not exec it)
        self.returncode: Optional[int] = None
        self.stdin: Optional[IO[bytes]] = None
        # Opened while the fork is still unreaped, so it names this process and no other.
        self._pidfd: Optional[int] = os.pidfd_open(pid)

    def _ended(self, timeout_s: Optional[float]) -> bool:
        """Has the fork ended (waiting up to `timeout_s`, None: for good)? Reaps it the first time it has."""
        if self._pidfd is None:
            return True
        readable, _, _ = select.select([self._pidfd], [], [], timeout_s)
        if not readable:
            return False
        os.close(self._pidfd)
        self._pidfd = None
        self.returncode = self._template.reap(self.pid)
        return True

    def kill(self) -> None:
        """SIGKILL the fork itself (its group may not exist yet: a fork just made has not yet called setsid)."""
        if self._pidfd is not None:
            kill_pidfd(self._pidfd)

    def poll(self) -> Optional[int]:
        self._ended(0.0)
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        if not self._ended(timeout):
            raise subprocess.TimeoutExpired(f"checker {self.pid}", timeout or 0)
        assert self.returncode is not None
        return self.returncode
