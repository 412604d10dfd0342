"""One GPU, several judgements at once: timing stays alone on the device.

`mkb problems validate --jobs N` on one GPU runs N judgements side by side, so process starts, imports, compiles
and correctness draws overlap. A timed phase must not share the device: another process's kernels would be
time-sliced into its samples. So every judgement holds this lock *shared* while it uses the GPU and *exclusively*
while it times (the kernel's draws, then its baselines); screens hold it shared. The first call, which is mostly
the candidate's compile (measured on the H200: up to 135 s for one CuTe kernel), holds nothing: a compile held
shared kept other judgements' timing waiting for minutes. Its one execution of the kernel may then overlap another
judgement's timed draws: one draw's worth of GPU work against 60 draws, whose median is what is reported.

A readers-writer lock from two `flock` files beside each other: `<path>` (the lock) and `<path>.turnstile`.
A timer takes the turnstile, then the lock exclusively, then lets the turnstile go; a reader passes through the
turnstile before taking the lock shared. So a waiting timer stops new readers and gets the device as soon as the
current ones finish (plain flock has no writer preference: overlapping readers could starve it). No process holds
the lock while it waits for the turnstile (an upgrade releases the shared hold first), so there is no deadlock.
Only checkers take it; a candidate's kernel process never sees the files. Standard library only.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import time
from typing import Iterator, Optional


class DeviceLock:
    """The lock at `path`; `None` (one judgement per device) makes every hold a no-op."""

    def __init__(self, path: Optional[str]) -> None:
        self.path = path
        self.waited_s = 0.0  # seconds spent waiting for the lock, reported in the verdict's phases
        self._fd: Optional[int] = None

    def _open(self, suffix: str = "") -> int:
        assert self.path is not None
        return os.open(self.path + suffix, os.O_RDWR | os.O_CREAT, 0o600)

    def _acquire(self, fd: int, mode: int) -> None:
        started = time.perf_counter()
        fcntl.flock(fd, mode)
        self.waited_s += time.perf_counter() - started

    def _take_shared(self) -> None:
        """Pass through the turnstile (behind any waiting timer), then hold the lock shared."""
        turnstile = self._open(".turnstile")
        try:
            self._acquire(turnstile, fcntl.LOCK_EX)
            self._fd = self._open()
            fcntl.flock(turnstile, fcntl.LOCK_UN)
            self._acquire(self._fd, fcntl.LOCK_SH)
        finally:
            os.close(turnstile)

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the device with other readers (correctness, screens)."""
        if self.path is None:
            yield
            return
        try:
            self._take_shared()
            yield
        finally:
            self._release()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the device alone (timing). Inside a `shared()` hold, the shared hold is given up for the duration
        and taken again afterwards."""
        if self.path is None:
            yield
            return
        resume = self._fd is not None
        self._release()
        turnstile, fd = self._open(".turnstile"), self._open()
        try:
            try:
                self._acquire(turnstile, fcntl.LOCK_EX)
                self._acquire(fd, fcntl.LOCK_EX)
                fcntl.flock(turnstile, fcntl.LOCK_UN)
            finally:
                os.close(turnstile)
            yield
        finally:
            os.close(fd)
            if resume:
                self._take_shared()

    @contextlib.contextmanager
    def released(self) -> Iterator[None]:
        """Inside a `shared()` hold: give it up for a phase that mostly does not use the device (the first call,
        which is the candidate's compile: 0.1 s to over 2 min), so a timer elsewhere need not wait for it."""
        if self._fd is None:
            yield
            return
        self._release()
        try:
            yield
        finally:
            self._take_shared()

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops its flock
            self._fd = None
