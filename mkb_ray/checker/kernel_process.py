"""The checker's handle on one sandboxed kernel process: start it, talk to it, tell how it ended.

Replies are read with a deadline; what comes back is parsed as data only (JSON of a fixed shape). A reply can
reject the call (`Rejected` with one of the kernel process's own check names) or say it is done; anything else —
malformed text, an unknown check, silence, death — ends the judgement with a reason the checker writes itself.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from .sandbox import ALL_DSLS, SandboxLimits, build_argv, prepare_staging, sandbox_env

# The rejections a kernel process may report about its own candidate (trusting a rejection is always safe).
KERNEL_CHECKS = {"import", "compile", "runtime", "dsl_launch", "output_type", "monkey_patch", "threads",
                 "correctness", "in_place"}
LOG_KEEP_BYTES = 16_000
MAX_REPLY_BYTES = 1 << 20
LOG_DRAIN_TIMEOUT_S = 5.0


class Rejected(Exception):
    """A judgement ended early; carries the failing check's name."""

    def __init__(self, check: str, reason: str, compiled: bool = True) -> None:
        super().__init__(reason)
        self.check, self.reason, self.compiled = check, reason, compiled


class _LogTail:
    """Keeps the last bytes of the kernel process's stderr (it may print without end)."""

    def __init__(self, fd: int) -> None:
        self.data = bytearray()
        self._thread = threading.Thread(target=self._drain, args=(fd,), daemon=True)
        self._thread.start()

    def _drain(self, fd: int) -> None:
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                self.data += chunk
                if len(self.data) > 2 * LOG_KEEP_BYTES:
                    del self.data[:-LOG_KEEP_BYTES]

    def text(self) -> str:
        return bytes(self.data[-LOG_KEEP_BYTES:]).decode(errors="replace")

    def finish(self, timeout_s: float) -> None:
        """Wait until everything the ended process wrote has been read (its end of the pipe closed)."""
        self._thread.join(timeout_s)


@dataclass(frozen=True)
class ForkedChannels:
    """A kernel process forked from a template (`mkb_ray.kernel_runner.template`), as its checker receives it:
    descriptors for its stdin, stdout and stderr, a pidfd of its monitor, the monitor's status pipe and the
    lifeline whose closing ends it; `staging` is its directories' parent on this side of the sandbox."""

    stdin: int
    stdout: int
    stderr: int
    pidfd: int
    status: int
    lifeline: int
    staging: Path

    @property
    def fds(self) -> tuple[int, ...]:
        return (self.stdin, self.stdout, self.stderr, self.pidfd, self.status, self.lifeline)

    def discard(self) -> None:
        """End a forked process that was never used: killed through its pidfd, every descriptor closed (its lifeline
        closing would end it too)."""
        kill_pidfd(self.pidfd)
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass


class ForkedSpare:
    """A process the pool forked ahead for a later step of this judgement (the baselines): taken at most once, and
    discarded at the end if it never was (the judgement ended early, or its baselines came from the cache)."""

    def __init__(self, channels: Optional[ForkedChannels] = None) -> None:
        self._channels = channels

    def take(self) -> Optional[ForkedChannels]:
        channels, self._channels = self._channels, None
        return channels

    def discard(self) -> None:
        if self._channels is not None:
            self._channels.discard()
            self._channels = None


class ForkedKernel:
    """The part of `subprocess.Popen` a `KernelProcess` uses, for a forked kernel process: it is not our child, so
    its end is seen on the pidfd and its exit code read from the monitor's status pipe (none: it was killed)."""

    def __init__(self, channels: ForkedChannels) -> None:
        self._pidfd: Optional[int] = channels.pidfd
        self._status, self._lifeline = channels.status, channels.lifeline
        self.pid = pidfd_pid(channels.pidfd)
        self.stdin = os.fdopen(channels.stdin, "wb")
        self.returncode: Optional[int] = None

    def poll(self) -> Optional[int]:
        if self.returncode is None and self._pidfd is not None and select.select([self._pidfd], [], [], 0)[0]:
            os.set_blocking(self._status, False)
            try:
                text = os.read(self._status, 64).decode().strip()
            except BlockingIOError:
                text = ""
            self.returncode = int(text) if text.lstrip("-").isdigit() else -int(signal.SIGKILL)
            for fd in (self._pidfd, self._status, self._lifeline):
                os.close(fd)
            self._pidfd = None
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        if self.returncode is None and self._pidfd is not None:
            if not select.select([self._pidfd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(f"kernel process {self.pid}", timeout or 0)
        code = self.poll()
        assert code is not None
        return code

    def kill(self) -> None:
        """SIGKILL the monitor; the kernel process dies with it (PR_SET_PDEATHSIG), and its namespace with that."""
        if self._pidfd is not None:
            kill_pidfd(self._pidfd)


def kill_pidfd(pidfd: int) -> None:
    """SIGKILL the process a pidfd refers to (nothing if it has ended: a pidfd never names another process)."""
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass


def pidfd_pid(pidfd: int) -> int:
    """The pid (in our PID namespace) of the process a pidfd refers to; -1 once it has been reaped."""
    with open(f"/proc/self/fdinfo/{pidfd}") as info:
        for line in info:
            if line.startswith("Pid:"):
                return int(line.split()[1])
    return -1


class KernelProcess:
    """One sandboxed `python -m mkb_ray.kernel_runner`, used for one candidate (or one baseline) and discarded;
    spawned through bubblewrap, or (`forked`) handed over already forked from a warm template."""

    def __init__(self, on_gpu: bool, limits: SandboxLimits = SandboxLimits(), writable: tuple[str, ...] = (),
                 role: str = "kernel", dsls: tuple[str, ...] = ALL_DSLS, profiled: bool = True,
                 forked: Optional[ForkedChannels] = None) -> None:
        self.on_gpu, self.role = on_gpu, role
        self.started = time.perf_counter()
        self._closed = False
        self.process: "subprocess.Popen[bytes] | ForkedKernel"
        if forked is not None:
            self.staging = forked.staging
            self.process = ForkedKernel(forked)
            self.log = _LogTail(forked.stderr)
            self._replies = forked.stdout
        else:
            self.staging = Path(tempfile.mkdtemp(prefix=f"mkb-{role}-", dir="/dev/shm" if os.path.isdir("/dev/shm")
                                                 else None))
            prepare_staging(self.staging, on_gpu)
            self.process = subprocess.Popen(
                build_argv(self.staging, on_gpu, limits, writable), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=sandbox_env(on_gpu, limits, role, dsls, profiled),
                start_new_session=True)
            assert self.process.stderr is not None and self.process.stdout is not None
            self.log = _LogTail(os.dup(self.process.stderr.fileno()))
            self.process.stderr.close()
            self._replies = self.process.stdout.fileno()
        self._pending = b""
        self.ready_s: Optional[float] = None
        self._start_failure: Optional[Rejected] = None

    @property
    def input_dir(self) -> Path:
        return self.staging / "input"

    @property
    def exchange_dir(self) -> Path:
        return self.staging / "exchange"

    def wait_ready(self, timeout_s: float) -> None:
        """Wait for the process's "ready" (its imports done); a second call returns at once, or raises the first
        call's failure again (a warming checker waits first, the judgement after it)."""
        if self.ready_s is not None:
            return
        if self._start_failure is not None:
            raise self._start_failure
        try:
            reply = self._read_reply(timeout_s, "starting")
            if reply.get("ready") is not True:
                raise Rejected("sandbox", "the kernel process did not start properly")
        except Rejected as failure:
            self._start_failure = failure
            raise
        self.ready_s = time.perf_counter() - self.started

    def send(self, message: dict[str, Any]) -> None:
        self._refuse_unsolicited(str(message.get("op")))
        assert self.process.stdin is not None
        try:
            self.process.stdin.write((json.dumps(message) + "\n").encode())
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._death("before it was sent a request") from None

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one request and wait for its reply; a rejection it reports is raised as `Rejected`."""
        self.send(message)
        return self.receive(timeout_s, str(message.get("op")))

    def receive(self, timeout_s: float, what: str) -> dict[str, Any]:
        reply = self._read_reply(timeout_s, what)
        if reply.get("ok") is True:
            return reply
        check, reason = reply.get("check"), reply.get("reason")
        if reply.get("ok") is False and check in KERNEL_CHECKS and isinstance(reason, str):
            raise Rejected(check, reason, compiled=check not in ("import", "compile"))
        raise Rejected("protocol", f"the kernel process answered '{what}' with something that is not a reply: "
                       f"{json.dumps(reply)[:300]}")

    def _read_reply(self, timeout_s: float, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise Rejected("timeout", f"the kernel process did not answer '{what}' within {timeout_s:.0f} s")
            ready, _, _ = select.select([self._replies], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self._replies, 65536)
            if not chunk:
                raise self._death(f"during '{what}'")
            self._pending += chunk
            if len(self._pending) > MAX_REPLY_BYTES:
                self.kill()
                raise Rejected("protocol", "the kernel process flooded its reply channel")
        line, _, self._pending = self._pending.partition(b"\n")
        if self._pending:
            self.kill()
            raise Rejected("protocol", f"the kernel process sent more than one reply to '{what}' (a forged or "
                           "early answer)")
        try:
            reply = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError):
            self.kill()
            raise Rejected("protocol", f"the kernel process answered '{what}' with text that is not JSON: "
                           f"{line[:200]!r}") from None
        if not isinstance(reply, dict):
            raise Rejected("protocol", f"the kernel process answered '{what}' with {type(reply).__name__}")
        return reply

    def _refuse_unsolicited(self, op: str) -> None:
        """Nothing may be waiting on the channel before a request: a reply nobody asked for is forged (or a late
        real one behind a forged one)."""
        ready, _, _ = select.select([self._replies], [], [], 0)
        if ready:
            chunk = os.read(self._replies, 65536)
            self._pending += chunk
        if self._pending:
            self.kill()
            raise Rejected("protocol", f"the kernel process wrote on its reply channel unasked (before '{op}'): "
                           f"{bytes(self._pending[:200])!r}")

    def _death(self, when: str) -> Rejected:
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            return Rejected("crash", f"the kernel process closed its reply channel {when}")
        # bubblewrap exits with 128 + N when the process it ran died of signal N.
        number = -code if code < 0 else code - 128 if 128 < code < 128 + signal.NSIG else 0
        if number:
            try:
                name = signal.Signals(number).name
            except ValueError:
                name = "unknown"
            how = f"was killed by signal {number} ({name})"
        else:
            how = f"exited with code {code}"
        return Rejected("crash", f"the kernel process {how} {when}")

    def kill(self) -> None:
        # bwrap is the group leader (a fork's monitor the process killed); its PID namespace takes every process
        # the kernel forked with it.
        if isinstance(self.process, ForkedKernel):
            self.process.kill()
        else:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        """End the process and read its log to the end. Once: a second kill could hit a reused process group."""
        if self._closed:
            return
        self._closed = True
        if self.process.poll() is None:
            try:
                self.send({"op": "exit"})
                self.process.wait(timeout=2)
            except (Rejected, subprocess.TimeoutExpired):
                pass
        self.kill()
        # Read to the end of the log before anyone takes its text: the drain thread can lag behind the process.
        self.log.finish(LOG_DRAIN_TIMEOUT_S)
        shutil.rmtree(self.staging, ignore_errors=True)
