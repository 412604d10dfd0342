"""Run one `python -m mkb_ray.judge_worker` process safely and collect what it says.

The process gets its own session (a kill takes its children too), a hard wall-clock timeout and a resident-memory
limit over its whole process tree. Its answer comes back on a private pipe, tagged with a nonce that the kernel
under judgement never sees; stdout/stderr are kept only as a log.
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import psutil

LOG_TAIL_CHARS = 4000
POLL_S = 0.05


@dataclass(frozen=True)
class JudgeLimits:
    """Hard limits on one judging process."""

    timeout_s: float = 600.0
    memory_mb: int = 12_000


@dataclass
class WorkerOutcome:
    payload: Optional[dict[str, Any]]  # the worker's answer, None if it gave none (or a forged one)
    killed_for: Optional[str]  # 'timeout' | 'memory_limit' | None
    returncode: Optional[int]
    wall_s: float
    log_tail: str


def _process_tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and its descendants, in MiB (processes that end meanwhile count 0)."""
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0
    for process in tree:
        try:
            total += process.memory_info().rss
        except psutil.Error:
            continue
    return total / 2**20


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def _drain(fd: int, chunks: list[bytes]) -> None:
    with os.fdopen(fd, "rb") as pipe:
        while True:
            data = pipe.read(65536)
            if not data:
                return
            chunks.append(data)


def _supervise(process: subprocess.Popen, limits: JudgeLimits) -> Optional[str]:
    deadline = time.monotonic() + limits.timeout_s
    next_memory_check = 0.0
    while process.poll() is None:
        now = time.monotonic()
        if now > deadline:
            _kill_group(process)
            return "timeout"
        if now >= next_memory_check:
            next_memory_check = now + 0.25
            if _process_tree_rss_mb(process.pid) > limits.memory_mb:
                _kill_group(process)
                return "memory_limit"
        time.sleep(POLL_S)
    _kill_group(process)  # anything the worker left in its session goes with it
    return None


def _parse_answer(raw: bytes, nonce: str) -> Optional[dict[str, Any]]:
    try:
        message = json.loads(raw.decode()) if raw else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(message, dict) or message.get("nonce") != nonce:
        return None
    answer = message.get("verdict")
    return answer if isinstance(answer, dict) else None


def worker_env() -> dict[str, str]:
    """The environment of a judging process: ours, with this checkout importable (the worker aims CuTe DSL at
    sm_90a itself, in `mkb_ray.judge_worker.__main__`)."""
    env = dict(os.environ)
    repo_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = repo_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_worker(message: dict[str, Any], limits: JudgeLimits) -> WorkerOutcome:
    """Send `message` (with 'request' and 'mode') to a fresh worker and wait for its answer or its end."""
    started = time.perf_counter()
    read_fd, write_fd = os.pipe()
    nonce = secrets.token_hex(16)
    # A scratch working directory per process: DSL tools drop artifacts (kept PTX, dumps) into the cwd.
    with tempfile.TemporaryFile() as log, tempfile.TemporaryDirectory(prefix="mkb-judge-") as scratch:
        process = subprocess.Popen(
            [sys.executable, "-m", "mkb_ray.judge_worker"], stdin=subprocess.PIPE, stdout=log,
            stderr=subprocess.STDOUT, pass_fds=(write_fd,), env=worker_env(), start_new_session=True, cwd=scratch)
        os.close(write_fd)
        chunks: list[bytes] = []
        reader = threading.Thread(target=_drain, args=(read_fd, chunks), daemon=True)
        reader.start()
        assert process.stdin is not None
        try:
            process.stdin.write(json.dumps({**message, "nonce": nonce, "result_fd": write_fd}).encode())
            process.stdin.close()
        except BrokenPipeError:
            pass
        killed_for = _supervise(process, limits)
        reader.join(timeout=5)
        log.seek(0)
        log_tail = log.read().decode(errors="replace")[-LOG_TAIL_CHARS:]
    return WorkerOutcome(_parse_answer(b"".join(chunks), nonce), killed_for, process.returncode,
                         time.perf_counter() - started, log_tail)
