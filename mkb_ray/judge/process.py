"""Run judging (checker) processes safely, from a warm pool, and collect what they say.

Each checker serves one submission. It gets its own session (a kill takes its group), dies with the thread that
started it (`PR_SET_PDEATHSIG`; its sandboxed kernel process dies with it in turn), a hard wall-clock timeout and
a resident-memory limit over its whole process tree. Its answer comes back on a private pipe, tagged with a
nonce; stdout/stderr are kept only as a log.

`CheckerPool` keeps spares started ahead: a checker imports torch and starts its kernel process (torch and both
DSLs imported) before it is handed work, so the 5-10 s of process start and imports overlap the time between
submissions (an agent's turn) instead of adding to the judgement. A checker says when it is warm by writing one
byte on a second pipe once its own imports and its kernel process's are done (`warm`, `CheckerPool.wait_warm`).
"""
from __future__ import annotations

import ctypes
import json
import logging
import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Optional

import psutil

from ..checker.checker_template import KERNEL_FIRST_FD, RESULT_FD, WARM_FD
from ..checker.kernel_process import ForkedChannels, kill_pidfd
from ..checker.sandbox import ALL_DSLS, SandboxUnavailable
from .device import gpu_arch
from .forking import CheckerTemplate, ForkedChild, TemplateUnavailable
from .kernel_template import KernelTemplate, monitor_pid

logger = logging.getLogger(__name__)
LOG_TAIL_CHARS = 4000
POLL_S = 0.02
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class JudgeLimits:
    """Hard limits on one judging process (and the kernel process it runs)."""

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


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the thread that started us ends (no orphaned checkers)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def worker_env() -> dict[str, str]:
    """The environment of a judging process: ours, with this checkout importable and the PTX cache named."""
    from .device import ptx_cache_dir

    env = dict(os.environ)
    repo_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = repo_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("MKB_PTX_CACHE_DIR", str(ptx_cache_dir()))
    return env


class CheckerProcess:
    """One started checker, waiting for its one message: spawned, or forked from a warm `CheckerTemplate`."""

    def __init__(self, device: str, kernel_process: bool = True, dsls: tuple[str, ...] = ALL_DSLS,
                 template: Optional[CheckerTemplate] = None, kernel: Optional[ForkedChannels] = None,
                 baseline: Optional[ForkedChannels] = None) -> None:
        """`kernel`: a kernel process already forked for this checker (only with `template`); the checker takes
        its channels, we keep a pidfd of it to count its memory and to kill it with the checker. `baseline` (only
        with `kernel`): a second one for the baselines, taken if they are measured; we keep a pidfd to kill it."""
        self.device, self.dsls = device, dsls
        self.forked_pidfds: dict[str, int] = {}  # "kernel" / "baseline" -> a pidfd of the process forked for it
        self.read_fd, self.write_fd = os.pipe()
        self.warm_fd, warm_write_fd = os.pipe()
        self._warm = False
        self.log: IO[bytes] = tempfile.TemporaryFile()
        self.scratch = tempfile.TemporaryDirectory(prefix="mkb-judge-")
        self.started = time.perf_counter()
        self.process: "subprocess.Popen[bytes] | ForkedChild | None" = None
        if template is not None:
            try:
                self.process = self._fork(template, kernel_process, warm_write_fd, kernel, baseline)
            except TemplateUnavailable as gone:
                logger.warning("spawning a checker: %s", gone)
        for forked, role in ((kernel, "kernel"), (baseline, "baseline")):
            if forked is None:
                continue
            if self.process is None:  # the spawned checker starts its processes itself: this one ends unused
                forked.discard()
                continue
            self.forked_pidfds[role] = os.dup(forked.pidfd)
            for fd in forked.fds:  # the forked checker holds its own copies now
                os.close(fd)
        if self.process is None:
            self.child_result_fd = self.write_fd  # pass_fds keeps the number
            self.process = subprocess.Popen(
                [sys.executable, "-m", "mkb_ray.checker", *self._argv(kernel_process, warm_write_fd)],
                stdin=subprocess.PIPE, stdout=self.log, stderr=subprocess.STDOUT,
                pass_fds=(self.write_fd, warm_write_fd), env=worker_env(), start_new_session=True,
                cwd=self.scratch.name, preexec_fn=_die_with_parent)
        os.close(self.write_fd)
        os.close(warm_write_fd)

    @property
    def kernel_pidfd(self) -> Optional[int]:
        """The forked kernel process's pidfd (its memory counts against the limits), or None."""
        return self.forked_pidfds.get("kernel")

    def _argv(self, kernel_process: bool, warm_fd: int) -> list[str]:
        return ["--device", self.device, "--dsls", ",".join(self.dsls), "--warm-fd", str(warm_fd),
                *([] if kernel_process else ["--no-kernel-process"])]

    def _fork(self, template: CheckerTemplate, kernel_process: bool, warm_write_fd: int,
              kernel: Optional[ForkedChannels], baseline: Optional[ForkedChannels]) -> ForkedChild:
        stdin_read, stdin_write = os.pipe()
        argv = self._argv(kernel_process, WARM_FD)
        passed: tuple[int, ...] = ()
        for forked, role in ((kernel, "kernel"), (baseline, "baseline")):
            if forked is not None:
                argv += [f"--{role}-fds", str(KERNEL_FIRST_FD + len(passed)), f"--{role}-staging", str(forked.staging)]
                passed += forked.fds
        try:
            child = template.fork(argv, worker_env(), self.scratch.name, stdin=stdin_read, log=self.log.fileno(),
                                  result=self.write_fd, warm=warm_write_fd, kernel_fds=passed)
        except BaseException:
            os.close(stdin_write)
            raise
        finally:
            os.close(stdin_read)
        child.stdin = os.fdopen(stdin_write, "wb")
        self.child_result_fd = RESULT_FD
        return child

    def alive(self) -> bool:
        return self.process.poll() is None

    def warm(self, wait_s: float = 0.0) -> bool:
        """Has this checker finished starting (its imports and its kernel process's)? Waits up to `wait_s`.
        A checker that died while starting never becomes warm."""
        if not self._warm and self.warm_fd >= 0:
            readable, _, _ = select.select([self.warm_fd], [], [], max(wait_s, 0.0))
            if readable:
                self._warm = os.read(self.warm_fd, 1) == b"w"
                os.close(self.warm_fd)
                self.warm_fd = -1
        return self._warm

    def run(self, message: dict[str, Any], limits: JudgeLimits) -> WorkerOutcome:
        started = time.perf_counter()
        nonce = secrets.token_hex(16)
        chunks: list[bytes] = []
        reader = threading.Thread(target=_drain, args=(self.read_fd, chunks), daemon=True)
        reader.start()
        assert self.process.stdin is not None
        try:
            request = {**message, "nonce": nonce, "result_fd": self.child_result_fd}
            self.process.stdin.write(json.dumps(request).encode())
            self.process.stdin.close()
        except BrokenPipeError:
            pass
        # Done when the checker exits or closes its answer pipe: it closes the pipe right after writing the verdict,
        # and the verdict needs nothing of its exit (a CUDA process's teardown takes a while).
        killed_for = _supervise(self.process, limits, self.kernel_pidfd, answered=lambda: not reader.is_alive())
        reader.join(timeout=5)
        answer = _parse_answer(b"".join(chunks), nonce)
        wall_s = time.perf_counter() - started
        self.log.seek(0)
        log_tail = self.log.read().decode(errors="replace")[-LOG_TAIL_CHARS:]
        self.close(reap_later=answer is not None)
        return WorkerOutcome(answer, killed_for, self.process.returncode, wall_s, log_tail)

    def close(self, reap_later: bool = False) -> None:
        """End the checker and its kernel process. `reap_later`: signal them now but wait for their end in the
        background (the verdict is in hand; only a spawned checker, whose reaping is ours alone)."""
        if self.process.poll() is None:
            _kill_group(self.process, reap=not (reap_later and isinstance(self.process, subprocess.Popen)))
        for pidfd in self.forked_pidfds.values():  # their lifelines closed with the checker; this ends them at once
            kill_pidfd(pidfd)
            os.close(pidfd)
        self.forked_pidfds.clear()
        if self.warm_fd >= 0:
            os.close(self.warm_fd)
            self.warm_fd = -1
        self.log.close()
        self.scratch.cleanup()


# Spare checkers a GPU evaluator keeps started: a checker takes 11-15 s to start on the H200 and a cached evaluation
# ~2.7 s, so 4 ran dry at 18.6 evaluations/min and 6 kept up at 22.0/min (benchmarks/results/, 2026-12-01).
GPU_SPARES = 6


class CheckerPool:
    """Spare checkers for one device, started ahead of need; each serves exactly one submission.

    Safe to share across threads. A checker dies with the thread that started it (PR_SET_PDEATHSIG), so share a
    pool only among long-lived threads (an executor's). `spares=0` starts a checker per request. A pool for one
    DSL (`dsls=("tirx",)`) warms kernel processes that import only that DSL (tvm alone costs 1.3 s of CPU per
    start here); a request in another DSL gets a fresh checker for its own DSL.

    Where no GPU executes (`device="cpu"`, or a machine without one), checkers are forked from a warm template
    (`forking.CheckerTemplate`: torch imported once per pool, not once per checker), and so are their kernel
    processes (`kernel_template.KernelTemplate`: torch and the DSL imported once per pool, inside the sandbox); on a
    GPU host both are spawned, since a CUDA context does not survive fork. `fork_checkers` overrides that choice
    (False: always spawn)."""

    def __init__(self, device: str = "cpu", spares: int = 1, dsls: tuple[str, ...] = ALL_DSLS,
                 fork_checkers: Optional[bool] = None) -> None:
        self.device, self.spares, self.dsls = device, spares, dsls
        self._ready: list[CheckerProcess] = []
        self._lock = threading.Lock()
        if fork_checkers is None:
            fork_checkers = device == "cpu" or gpu_arch() is None
        self._template = CheckerTemplate(worker_env(), _die_with_parent) if fork_checkers else None
        # Kernel processes are forked too wherever checkers are: there they run on the CPU (a CUDA context does not
        # survive fork). Profiled unless they only compile (a GPU kernel where no GPU is).
        self._kernel_template = _start_kernel_template(dsls, profiled=device == "cpu") if fork_checkers else None
        with self._lock:
            self._fill()

    def start_checker(self, device: str, dsls: tuple[str, ...] = ALL_DSLS, kernel_process: bool = True
                      ) -> CheckerProcess:
        """A new checker for `device`: forked from this pool's template when it has a live one for that device,
        with a kernel process forked from the pool's kernel template when that imports the same DSLs."""
        template = self._template if self._template is not None and device == self.device else None
        if template is not None and not template.alive():
            logger.warning("the checker template of a %s pool ended; spawning checkers from now on", self.device)
            self._template = template = None
        kernel = baseline = None
        if template is not None and kernel_process and tuple(dsls) == tuple(self.dsls):
            kernel = self._fork_kernel()
            if kernel is not None and device == "cpu":
                # The baselines' process too, forked now rather than spawned when they are measured (an interpreter
                # and `import torch`, 2-3 s of CPU per judgement that times a kernel here). It waits, idle and walled
                # off like any fork, until the kernel process has ended; a checker that does not need it ends it.
                baseline = self._fork_kernel()
        return CheckerProcess(device, kernel_process=kernel_process, dsls=dsls, template=template, kernel=kernel,
                              baseline=baseline)

    def _fork_kernel(self) -> Optional[ForkedChannels]:
        """A kernel process from the kernel template, or None (then the checker starts its own)."""
        kernel_template = self._kernel_template
        if kernel_template is None:
            return None
        try:
            if not kernel_template.alive():
                raise TemplateUnavailable("it ended")
            return kernel_template.fork()
        except TemplateUnavailable as gone:
            logger.warning("kernel processes of a %s pool are spawned from now on: %s", self.device, gone)
            self._kernel_template = None
            kernel_template.close()
            return None

    def _drop_dead(self) -> None:
        """Forget spares that died (the caller holds the lock)."""
        self._ready = [c for c in self._ready if c.alive()]

    def _fill(self) -> None:
        self._drop_dead()
        while len(self._ready) < self.spares:
            self._ready.append(self.start_checker(self.device, self.dsls))

    def take(self, device: str, dsl: Optional[str] = None) -> CheckerProcess:
        """A warm spare (or a fresh checker when none is left). Its replacement is not started here but by
        `replenish`, once the judgement is over: a checker starting up (importing torch and both DSLs) beside a
        kernel's timed draws slowed them by up to 8x on 2 cores (benchmarks/timing_noise.py, spares 1 vs 0)."""
        if device != self.device or (dsl is not None and dsl not in self.dsls):
            return self.start_checker(device, (dsl,) if dsl in ALL_DSLS else ALL_DSLS)
        with self._lock:
            self._drop_dead()
            return self._ready.pop(0) if self._ready else self.start_checker(device, self.dsls)

    def wait_warm(self, timeout_s: float = 120.0, every: bool = False) -> bool:
        """Wait until the next spare `take` would hand out has finished starting (`every`: all spares, so that none
        is still importing beside the next judgement, as after an agent's turn); False when there is none or one did
        not warm up within `timeout_s` (an evaluator can wait here between an agent's submissions)."""
        with self._lock:
            self._drop_dead()
            spares = list(self._ready if every else self._ready[:1])
        deadline = time.monotonic() + timeout_s
        return bool(spares) and all(spare.warm(max(0.0, deadline - time.monotonic())) for spare in spares)

    def replenish(self) -> None:
        """Start spares up to `spares` again (after a judgement, see `take`)."""
        with self._lock:
            self._fill()

    def close(self) -> None:
        with self._lock:
            for checker in self._ready:
                checker.close()
            self._ready = []
            if self._template is not None:
                self._template.close()  # it ends once the checkers taken from it have been waited for
                self._template = None
            if self._kernel_template is not None:
                self._kernel_template.close()  # likewise, once the kernel processes forked from it have ended
                self._kernel_template = None

    def __enter__(self) -> "CheckerPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _kill_group(process: "subprocess.Popen[bytes] | ForkedChild", reap: bool = True) -> None:
    """SIGKILL the process's group; wait for its end here (`reap`) or in a background thread."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if process.poll() is None:  # not yet a group leader (a fork that has not reached setsid)
        process.kill()
    if reap:
        process.wait()
    else:
        threading.Thread(target=process.wait, daemon=True, name=f"reap-{process.pid}").start()


def _drain(fd: int, chunks: list[bytes]) -> None:
    with os.fdopen(fd, "rb") as pipe:
        while True:
            data = pipe.read(65536)
            if not data:
                return
            chunks.append(data)


def _supervise(process: "subprocess.Popen[bytes] | ForkedChild", limits: JudgeLimits,
               kernel_pidfd: Optional[int] = None, answered: Callable[[], bool] = lambda: False) -> Optional[str]:
    """Wait for the checker within the limits, until it ends or has `answered`; its memory counts its kernel
    process's, forked (`kernel_pidfd`: not a descendant of the checker) or not."""
    deadline = time.monotonic() + limits.timeout_s
    next_memory_check = 0.0
    killed_for = None
    while process.poll() is None and not answered():
        now = time.monotonic()
        if now > deadline:
            killed_for = "timeout"
            break
        if now >= next_memory_check:
            next_memory_check = now + 0.25
            kernel_pid = monitor_pid(kernel_pidfd)
            used = _process_tree_rss_mb(process.pid) + (_process_tree_rss_mb(kernel_pid) if kernel_pid else 0.0)
            if used > limits.memory_mb:
                killed_for = "memory_limit"
                break
        time.sleep(POLL_S)
    if not answered():  # an answered checker is ended by its owner's close(), which need not wait for it
        _kill_group(process)  # anything the worker left in its session goes with it
    if kernel_pidfd is not None:
        kill_pidfd(kernel_pidfd)
    return killed_for


def _start_kernel_template(dsls: tuple[str, ...], profiled: bool) -> Optional[KernelTemplate]:
    """A pool's kernel-process template, or None where it cannot start (no bubblewrap: the checker's own start
    of a kernel process then reports why)."""
    from ..checker.__main__ import writable_caches

    env = worker_env()
    try:
        return KernelTemplate(dsls, profiled, writable=writable_caches(env.get("MKB_PTX_CACHE_DIR")),
                              preexec_fn=_die_with_parent)
    except SandboxUnavailable as missing:
        logger.warning("no kernel-process template: %s", missing)
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


def run_worker(message: dict[str, Any], limits: JudgeLimits, pool: Optional[CheckerPool] = None,
               device: str = "cpu") -> WorkerOutcome:
    """Send `message` (with 'request' and 'mode') to a checker (a pool's spare, or a fresh one) and wait."""
    if message.get("mode") == "screen":  # no candidate: no kernel process
        checker = (pool.start_checker(device, kernel_process=False) if pool is not None
                   else CheckerProcess(device, kernel_process=False))
        return checker.run(message, limits)
    if pool is None:
        return CheckerProcess(device).run(message, limits)
    try:
        return pool.take(device, message.get("request", {}).get("dsl")).run(message, limits)
    finally:
        pool.replenish()
