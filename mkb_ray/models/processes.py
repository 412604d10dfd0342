"""Process bookkeeping for model servers: which processes an endpoint owns, their memory, and killing them all.

vLLM spawns children (the API server starts an `EngineCore`, which starts a `Worker`), and Ray Serve runs them under
replica actors: stopping a server must leave none of them behind. Everything here is local to this node (psutil).
"""
from __future__ import annotations

import logging
import os
import signal
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable

import psutil

logger = logging.getLogger(__name__)


def descendants(pids: list[int]) -> list[int]:
    """`pids` and all their live descendants, without duplicates."""
    found: dict[int, None] = {}
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            found[pid] = None
            for child in proc.children(recursive=True):
                found[child.pid] = None
        except psutil.NoSuchProcess:
            continue
    return list(found)


def processes_titled(prefix: str) -> list[int]:
    """Live processes whose command line starts with `prefix` (Ray sets `ray::<actor>` process titles)."""
    pids = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if cmdline and cmdline[0].startswith(prefix):
            pids.append(proc.pid)
    return pids


def alive(pids: list[int]) -> list[int]:
    """The pids that still run (zombies count as gone: they hold no memory and no sockets)."""
    live = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                live.append(pid)
        except psutil.NoSuchProcess:
            continue
    return live


def wait_for(predicate: Callable[[], Any], timeout_s: float, every_s: float = 0.5) -> bool:
    """Poll `predicate()` every `every_s` until it is true or `timeout_s` has passed; whether it ended true. A
    predicate that meets a hopeless state may raise, which ends the wait at once."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return bool(value)
        time.sleep(every_s)


def wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    """Wait until none of `pids` runs; returns those still running at the deadline."""
    left = pids

    def gone() -> bool:
        nonlocal left
        left = alive(left)
        return not left

    wait_for(gone, timeout_s, every_s=0.25)
    return left


def wait_port_closed(port: int, timeout_s: float, host: str = "127.0.0.1") -> bool:
    """Wait until nothing accepts connections on host:port; whether it closed in time."""
    return wait_for(lambda: not port_open(port, host), timeout_s, every_s=0.25)


def kill_all(pids: list[int], sig: int = signal.SIGKILL) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            continue


def terminate_tree(pids: list[int], grace_s: float) -> list[int]:
    """SIGTERM `pids` (and what they spawned), SIGKILL what is left after `grace_s`; returns the pids force-killed."""
    tree = descendants(pids)
    kill_all(tree, signal.SIGTERM)
    left = wait_gone(tree, grace_s)
    if left:
        logger.warning("force-killing %d process(es) that ignored SIGTERM: %s", len(left), left)
        kill_all(left, signal.SIGKILL)
        wait_gone(left, 10.0)
    return left


@dataclass(frozen=True)
class MemoryUsage:
    processes: int
    rss_mb: float  # resident set, summed (shared pages counted once per process)
    pss_mb: float  # proportional set: shared pages split between their users (0 where /proc hides it)


def memory_of(pids: list[int]) -> MemoryUsage:
    rss = pss = 0
    count = 0
    for pid in alive(pids):
        try:
            proc = psutil.Process(pid)
            rss += proc.memory_info().rss
            try:
                pss += getattr(proc.memory_full_info(), "pss", 0)
            except (psutil.AccessDenied, OSError):
                pass
            count += 1
        except psutil.NoSuchProcess:
            continue
    return MemoryUsage(processes=count, rss_mb=rss / 2**20, pss_mb=pss / 2**20)


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Does something accept connections on host:port?"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the caller binds it soon after; the race is acceptable on loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
