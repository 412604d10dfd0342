"""Run one shell command of an agent inside its attempt workspace, sandboxed by bubblewrap.

What the command sees: its workspace (read-write, at /workspace), a read-only system (/usr, /etc and the Python
installation that runs mkb-ray, so `python` with torch, tvm and cutlass works), a private /tmp, a minimal /dev
(no GPU device nodes), its own /proc, no network (an empty network namespace: every connect fails), no other
process of the machine. Everything else (the repository with the problems' solutions, other attempts' workspaces,
home directories) does not exist there. The environment is rebuilt from scratch, so no API key leaks in.

When we run as root, bubblewrap sets the namespaces up as root and `setpriv` then drops the command to an
unprivileged uid (nobody by default) with no capabilities and no-new-privs: it cannot read root-only files and
the per-user process limit applies to it. Otherwise bubblewrap runs unprivileged inside a user namespace.

Limits (see `SandboxLimits`): a wall-clock timeout (the whole process tree is killed), CPU seconds, address space,
file size and process count per process (rlimits, inherited by every child), a size-capped /tmp, and output:
only the head and tail of stdout/stderr are kept, and a command that keeps printing past a hard cap is killed.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from ..checker import bwrap

logger = logging.getLogger(__name__)

WORKSPACE_MOUNT = "/workspace"
NOBODY_UID = 65534
KilledFor = Literal["timeout", "cpu_limit", "output_limit"]
_READ_CHUNK_BYTES = 65536


class SandboxUnavailable(RuntimeError):
    """bubblewrap (or setpriv, when running as root) is missing: run scripts/install-system.sh."""


class SandboxLimits(BaseModel):
    """Resource limits of one sandboxed command."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = 1
    wall_timeout_s: float = Field(180.0, gt=0, description="the whole process tree is killed after this")
    cpu_time_s: int = Field(600, gt=0, description="RLIMIT_CPU per process (SIGXCPU, then SIGKILL a second later)")
    address_space_bytes: int = Field(16 << 30, gt=0, description="RLIMIT_AS per process (torch+tvm need ~1.1 GiB)")
    file_size_bytes: int = Field(256 << 20, gt=0, description="RLIMIT_FSIZE: the largest file a command may write")
    max_processes: int = Field(1024, gt=0, description="RLIMIT_NPROC (threads count); enforced when the sandbox "
                                                       "runs under its own uid, i.e. when mkb-ray runs as root")
    tmp_bytes: int = Field(1 << 30, gt=0, description="size of the private /tmp and /dev/shm tmpfs")
    kept_output_bytes: int = Field(16_000, gt=0, description="per stream: the head and tail kept for the model")
    max_output_bytes: int = Field(32 << 20, gt=0, description="a command that prints more than this is killed")
    cpu_threads: int = Field(2, gt=0, description="OMP/TVM thread counts inside (they default to every core)")


class SandboxPolicy(BaseModel):
    """What the sandbox exposes and how it runs; `default_policy()` fills the system paths for this machine."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = 1
    limits: SandboxLimits = Field(default_factory=SandboxLimits)
    ro_binds: list[str] = Field(description="host directories visible read-only, at the same path")
    sandbox_uid: int = Field(NOBODY_UID, description="uid (and gid) the command runs as when mkb-ray runs as root")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables inside")


class SandboxResult(BaseModel):
    """What one sandboxed command did. Output is decoded as UTF-8 (invalid bytes replaced) and possibly cut."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = 1
    command: str
    exit_code: Optional[int] = Field(None, description="the command's exit status; 128+N when signal N ended it")
    stdout: str
    stderr: str
    stdout_bytes: int = Field(description="bytes the command wrote to stdout, kept or not")
    stderr_bytes: int
    truncated: bool = Field(description="some output was cut (see kept_output_bytes)")
    timed_out: bool
    killed_for: Optional[KilledFor] = None
    wall_s: float


def default_policy(limits: SandboxLimits | None = None, extra_ro_binds: list[str] | None = None) -> SandboxPolicy:
    """System directories plus the Python installation running us (venv and its base interpreter)."""
    binds = bwrap.system_dirs()
    for prefix in dict.fromkeys([sys.prefix, os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)]):
        if not bwrap.under(prefix, binds):
            binds.append(prefix)
    binds.extend(extra_ro_binds or [])
    return SandboxPolicy(limits=limits or SandboxLimits(), ro_binds=binds)


def bwrap_path() -> str:
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed: run scripts/install-system.sh")
    return path


@functools.lru_cache(maxsize=None)
def _bwrap_supports(option: str) -> bool:
    """Whether this bubblewrap knows `option` (--size came with 0.7, --disable-userns with 0.8)."""
    try:
        text = subprocess.run([bwrap_path(), "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in text


def _runs_privileged() -> bool:
    return os.geteuid() == 0


def sandbox_env(policy: SandboxPolicy) -> dict[str, str]:
    """The whole environment inside: nothing is inherited from ours (API keys stay out)."""
    threads = str(policy.limits.cpu_threads)
    bin_dirs = [os.path.join(sys.prefix, "bin"), "/usr/local/bin", "/usr/bin", "/bin"]
    env = {
        "PATH": ":".join(bin_dirs), "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "TVM_NUM_THREADS": threads,
        # No GPU inside; CuTe DSL then needs its target arch named (it defaults to sm_100a without a GPU).
        "CUDA_VISIBLE_DEVICES": "", "CUTE_DSL_ARCH": "sm_90a",
    }
    env.update(policy.env)
    return env


def build_bwrap_argv(command: str, workspace: Path, policy: SandboxPolicy) -> list[str]:
    """The full bubblewrap command line for `command` (run by bash) in `workspace`. Pure: no side effects."""
    binds = [b for b in policy.ro_binds if os.path.exists(b)]
    tmp_bytes = policy.limits.tmp_bytes if _bwrap_supports("--size") else None
    argv = bwrap.base_argv(bwrap_path(), binds, later_mounts=[WORKSPACE_MOUNT], tmp_bytes=tmp_bytes)
    argv += ["--bind", str(workspace.resolve()), WORKSPACE_MOUNT, "--chdir", WORKSPACE_MOUNT,
             "--hostname", "sandbox", "--die-with-parent", "--new-session"]
    shell = ["/bin/bash", "-c", command]
    if _runs_privileged():
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise SandboxUnavailable("running as root needs setpriv (util-linux) to drop privileges")
        argv += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                 *bwrap.drop_to_uid(setpriv, policy.sandbox_uid), "--"] + shell
    else:
        # No nested user namespaces either, where bubblewrap can forbid them.
        argv += ["--unshare-all", "--unshare-user",
                 *(["--disable-userns"] if _bwrap_supports("--disable-userns") else []), "--"] + shell
    return argv


def prepare_workspace(workspace: Path, policy: SandboxPolicy) -> None:
    """Make `workspace` writable by the sandbox's uid (only needed when we run as root). Symlinks are not followed."""
    workspace.mkdir(parents=True, exist_ok=True)
    if not _runs_privileged():
        return
    uid = policy.sandbox_uid
    os.chown(workspace, uid, uid)
    for root, dirs, files in os.walk(workspace):
        for name in dirs + files:
            os.chown(os.path.join(root, name), uid, uid, follow_symlinks=False)


def _rlimits(limits: SandboxLimits) -> dict[str, tuple[int, int]]:
    """The rlimits (soft, hard) every process of a command inherits, by prlimit option name."""
    values = {
        "cpu": (limits.cpu_time_s, limits.cpu_time_s + 1),  # SIGXCPU at the soft limit, SIGKILL a second later
        "as": (limits.address_space_bytes, limits.address_space_bytes),
        "fsize": (limits.file_size_bytes, limits.file_size_bytes),
        "core": (0, 0),
    }
    if _runs_privileged():
        # Counted per real uid: only meaningful when the command gets a uid of its own (as root we drop to one).
        # Run as an ordinary user, the count would include all of that user's processes (Ray workers, ...).
        values["nproc"] = (limits.max_processes, limits.max_processes)
    return values


def _rlimit_prefix(limits: SandboxLimits) -> list[str]:
    """`prlimit --cpu=... -- ` in front of bwrap, so the limits need no preexec_fn (unsafe in a process with
    threads, as Ray actors and the evaluator's thread pool are). Empty when prlimit is missing."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        return []
    return [prlimit] + [f"--{name}={soft}:{hard}" for name, (soft, hard) in _rlimits(limits).items()] + ["--"]


_RESOURCES = {"cpu": resource.RLIMIT_CPU, "as": resource.RLIMIT_AS, "fsize": resource.RLIMIT_FSIZE,
              "core": resource.RLIMIT_CORE, "nproc": resource.RLIMIT_NPROC}


def _limit_resources(limits: SandboxLimits) -> None:
    """The fallback without prlimit: set the same rlimits in the forked child before exec."""
    for name, value in _rlimits(limits).items():
        resource.setrlimit(_RESOURCES[name], value)


class _KeptOutput:
    """Keeps the first and last `keep_bytes // 2` bytes of a stream and counts the rest."""

    def __init__(self, keep_bytes: int) -> None:
        self.half = max(1, keep_bytes // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[:-self.half]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if self.truncated:
            omitted = self.total - len(self.head) - len(self.tail)
            return f"{head}\n[... {omitted} bytes omitted ...]\n{tail}"
        return head + tail


def _kill_tree(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL bwrap's process group. The command lives in its own PID namespace whose init is bwrap's child:
    when bwrap dies that init dies (die-with-parent), and the kernel then kills everything in the namespace,
    including processes that started their own sessions."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


async def run_sandboxed(command: str, workspace: Path, policy: SandboxPolicy | None = None,
                        stdin_bytes: bytes | None = None) -> SandboxResult:
    """Run `command` with bash in `workspace` under the sandbox; never raises for what the command does."""
    policy = policy or default_policy()
    limits = policy.limits
    prefix = _rlimit_prefix(limits)
    argv = prefix + build_bwrap_argv(command, workspace, policy)
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE if stdin_bytes is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=sandbox_env(policy),
        start_new_session=True, preexec_fn=None if prefix else (lambda: _limit_resources(limits)))
    streams = {"stdout": _KeptOutput(limits.kept_output_bytes), "stderr": _KeptOutput(limits.kept_output_bytes)}
    killed_for: Optional[KilledFor] = None

    async def pump(reader: asyncio.StreamReader, kept: _KeptOutput) -> None:
        nonlocal killed_for
        while chunk := await reader.read(_READ_CHUNK_BYTES):
            kept.add(chunk)
            if streams["stdout"].total + streams["stderr"].total > limits.max_output_bytes and killed_for is None:
                killed_for = "output_limit"
                _kill_tree(proc)

    async def feed() -> None:
        assert proc.stdin is not None  # stdin is a pipe exactly when there is something to feed
        try:
            proc.stdin.write(stdin_bytes or b"")
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the command did not read all of its input: its business
        finally:
            proc.stdin.close()

    tasks = [asyncio.ensure_future(pump(proc.stdout, streams["stdout"])),  # type: ignore[arg-type]
             asyncio.ensure_future(pump(proc.stderr, streams["stderr"]))]  # type: ignore[arg-type]
    if stdin_bytes is not None:
        tasks.append(asyncio.ensure_future(feed()))
    try:
        await asyncio.wait_for(asyncio.gather(*tasks, proc.wait()), timeout=limits.wall_timeout_s)
    except asyncio.TimeoutError:
        killed_for = killed_for or "timeout"
        _kill_tree(proc)
        await proc.wait()
        # The pipes close once every process in the namespace is gone; bound the wait in case one lingers.
        await asyncio.wait(tasks, timeout=5.0)
        for task in tasks:
            task.cancel()
    except asyncio.CancelledError:
        _kill_tree(proc)
        raise
    code = proc.returncode
    exit_code = 128 - code if code is not None and code < 0 else code
    if killed_for is None and exit_code == 128 + signal.SIGXCPU:
        killed_for = "cpu_limit"
    out, err = streams["stdout"], streams["stderr"]
    result = SandboxResult(
        command=command, exit_code=exit_code, stdout=out.text(), stderr=err.text(), stdout_bytes=out.total,
        stderr_bytes=err.total, truncated=out.truncated or err.truncated, timed_out=killed_for == "timeout",
        killed_for=killed_for, wall_s=round(time.monotonic() - started, 3))
    logger.debug("sandboxed %r -> exit %s (%s) in %.2f s", command[:80], exit_code, killed_for, result.wall_s)
    return result


class WorkspaceFileError(ValueError):
    """A workspace file the host was asked to read is missing or not a plain file (the message says which)."""


@dataclass(frozen=True)
class WorkspaceFile:
    data: bytes  # at most max_bytes + 1 bytes: more than max_bytes means the file is too big
    size_bytes: int  # the file's size on disk


def read_workspace_file(workspace: Path, name: str, max_bytes: int) -> WorkspaceFile:
    """Read `name` (a file directly in `workspace`) on the host side, trusting nothing the sandbox made: a symlink
    (say kernel.py -> a solution file elsewhere on the host), a FIFO (which would block us) or a directory is
    refused, and at most `max_bytes + 1` bytes are read."""
    if not name or "/" in name or name in (".", ".."):
        raise WorkspaceFileError(f"{name!r} is not a file name in the workspace")
    dir_fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dir_fd)
        except FileNotFoundError:
            raise WorkspaceFileError(f"{name} does not exist in the workspace") from None
        except OSError as err:  # ELOOP: the name is a symlink
            raise WorkspaceFileError(f"{name} cannot be read: it is a symbolic link or not a plain file "
                                     f"({err.strerror})") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise WorkspaceFileError(f"{name} is not a plain file")
            chunks, read = [], 0
            while read <= max_bytes and (chunk := os.read(fd, min(1 << 20, max_bytes + 1 - read))):
                chunks.append(chunk)
                read += len(chunk)
            return WorkspaceFile(data=b"".join(chunks), size_bytes=max(info.st_size, read))
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)
