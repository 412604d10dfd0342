"""The OS sandbox of a kernel process: what hostile code may see and do while it runs `solve`.

bubblewrap builds it (stdlib only here: this module runs in the checker, on bare GPU hosts too):
- namespaces: its own network (no interface but loopback: every connect fails), PID (it cannot see the checker,
  so no ptrace, `process_vm_readv` or `/proc/<checker>/mem`; everything it forks dies with it), IPC, UTS;
- filesystem: read-only system and Python directories, the repository's `mkb_ray/` package only (no problems,
  no solutions), the candidate read-only, and two writable directories of its own (the exchange buffer and a
  scratch/home for the DSLs' caches); a private /tmp and /dev, with the GPU's device nodes when it runs on one;
- privileges: as root, no capabilities (`--cap-drop ALL`) and `no_new_privs`; on the CPU target it also runs as
  `nobody`, which makes the process-count rlimit bite (CUDA IPC needs the checker's uid, so GPU runs keep uid 0);
- lifetime: `--die-with-parent` (the checker ending ends it) and its own session;
- rlimits (set by the kernel process before it imports anything of the candidate's): CPU seconds, open files,
  file size, no core dumps; address space on the CPU target.

A kernel-process template (`mkb_ray.kernel_runner.template`, CPU only) runs in the same sandbox with two more
mounts: its forks' directories (`/judge/kids`) and the host's /proc (`/judge/hostproc`, which lets a fork mount a
/proc of its own); each fork covers both before its candidate runs (`mkb_ray.kernel_runner.isolation`).
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from . import bwrap

NOBODY = 65534
SANDBOX_ROOT = "/judge"
REPO_ROOT = Path(__file__).resolve().parents[2]


class SandboxUnavailable(RuntimeError):
    """No bubblewrap: the judge refuses to run a kernel without its sandbox."""


@dataclass(frozen=True)
class SandboxLimits:
    cpu_s: int = 900
    address_space_bytes: int = 32 << 30  # CPU target only: CUDA reserves far more virtual memory than this
    file_bytes: int = 1 << 30
    open_files: int = 4096
    processes: int = 512
    threads: int = 2


def bwrap_path() -> str:
    path = os.environ.get("MKB_BWRAP") or shutil.which("bwrap")
    if not path:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed: the kernel process needs its sandbox "
                                 "(scripts/install-system.sh; on an offline GPU host stage it with "
                                 "scripts/stage-gpu-extras.sh)")
    return path


def _python_dirs() -> list[str]:
    """The interpreter's installation and every import path of ours except the repository itself."""
    dirs = [sys.prefix, os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)]
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry and os.path.isdir(entry) and os.path.realpath(entry) != str(REPO_ROOT):
            dirs.append(os.path.realpath(entry))
    return dirs


def _outermost(paths: list[str]) -> list[str]:
    kept: list[str] = []
    for path in sorted(dict.fromkeys(p for p in paths if os.path.exists(p)), key=len):
        if not bwrap.under(path, kept):
            kept.append(path)
    return kept


def runner_uid(on_gpu: bool) -> Optional[int]:
    """The uid the kernel process runs as, when the checker runs as root (None: keep the checker's)."""
    return None if on_gpu or os.geteuid() != 0 else NOBODY


def build_argv(staging: Path, on_gpu: bool, limits: SandboxLimits, writable: tuple[str, ...] = (),
               kids: Optional[Path] = None, entry: tuple[str, ...] = ("mkb_ray.kernel_runner",)) -> list[str]:
    """The command line that starts a kernel process with `staging/{input,exchange,scratch}` as its world.
    A kernel-process template (`entry` its module and arguments) also sees `kids`, the parent of its forks'
    directories, at `/judge/kids` (each fork covers it again before its candidate runs)."""
    read_only = _outermost(bwrap.system_dirs(extra_tops=("/opt",)) + _python_dirs())
    code = str(REPO_ROOT / "mkb_ray")
    if not bwrap.under(code, read_only):
        read_only.append(code)
    # A 0700 /root (pyenv) or checkout would hide the interpreter from `nobody`: base_argv makes the mount
    # points 0755.
    argv = bwrap.base_argv(bwrap_path(), read_only, later_mounts=writable, made_dirs=[SANDBOX_ROOT])
    argv += ["--ro-bind", str(staging / "input"), f"{SANDBOX_ROOT}/input",
             "--bind", str(staging / "exchange"), f"{SANDBOX_ROOT}/exchange",
             "--bind", str(staging / "scratch"), f"{SANDBOX_ROOT}/scratch"]
    if kids is not None:  # a fork mounts its own /proc, which needs a fully visible one (read-write) to exist
        argv += ["--bind", str(kids), f"{SANDBOX_ROOT}/kids", "--bind", "/proc", f"{SANDBOX_ROOT}/hostproc"]
    for path in writable:
        if os.path.isdir(path):
            argv += ["--bind", path, path]
    if on_gpu:
        for node in sorted(glob.glob("/dev/nvidia*")):
            argv += ["--dev-bind", node, node]
        argv += ["--ro-bind", "/sys", "/sys"]  # the CUDA driver reads the device's topology there
    argv += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
             "--die-with-parent", "--new-session", "--chdir", f"{SANDBOX_ROOT}/scratch"]
    uid = runner_uid(on_gpu)
    if os.geteuid() == 0 and uid is not None:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise SandboxUnavailable("running as root needs setpriv (util-linux) to drop the kernel's privileges")
        argv += bwrap.drop_to_uid(setpriv, uid)
    elif os.geteuid() == 0:
        argv += ["--cap-drop", "ALL", "--"]
    else:
        argv += ["--unshare-user", "--"]
    return argv + [sys.executable, "-m", entry[0], SANDBOX_ROOT, *entry[1:]]


# The module each DSL's kernels are written with: what a warm kernel process imports before its candidate is known.
DSL_MODULES = {"cutedsl": "cutlass.cute", "tirx": "tvm"}
ALL_DSLS = tuple(DSL_MODULES)


def sandbox_env(on_gpu: bool, limits: SandboxLimits, role: str = "kernel",
                dsls: tuple[str, ...] = ALL_DSLS, profiled: bool = True) -> dict[str, str]:
    """The kernel process's whole environment: nothing of ours leaks in but import paths and the GPU choice.
    A kernel process warms up with `dsls` imported; a baseline process (the reference only) with none.
    `profiled=False`: its calls are never profiled (a GPU kernel on a machine without a GPU only compiles), so it
    skips the profiler's warm-up (0.8 s of CPU a start)."""
    scratch = f"{SANDBOX_ROOT}/scratch"
    paths = [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                if p and os.path.realpath(p) != str(REPO_ROOT)]
    rlimits = {"cpu": limits.cpu_s, "fsize": limits.file_bytes, "nofile": limits.open_files, "core": 0}
    if not on_gpu:
        rlimits["as"] = limits.address_space_bytes
    if runner_uid(on_gpu) is not None:
        rlimits["nproc"] = limits.processes
    env = {
        "PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin", "HOME": scratch,
        "TMPDIR": scratch, "XDG_CACHE_HOME": f"{scratch}/.cache", "LANG": "C.UTF-8",
        "PYTHONPATH": os.pathsep.join(paths),
        "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": str(limits.threads), "TVM_NUM_THREADS": str(limits.threads),
        "CUTE_DSL_ARCH": os.environ.get("CUTE_DSL_ARCH", "sm_90a"),
        "TORCHINDUCTOR_CACHE_DIR": f"{scratch}/inductor", "TRITON_CACHE_DIR": f"{scratch}/triton",
        "MKB_RUNNER_RLIMITS": json.dumps(rlimits), "MKB_RUNNER_DEVICE": "cuda" if on_gpu else "cpu",
        "MKB_RUNNER_PROFILER_WARMUP": "1" if role == "kernel" and profiled else "0",
        "MKB_RUNNER_IMPORT_DSLS": ",".join(DSL_MODULES[d] for d in dsls) if role == "kernel" else "",
        # NVRTC's precompiled header for TIRx compiles on a GPU (kernel_runner/nvrtc_headers.py); MKB_NVRTC_PCH=0 in
        # the judge's environment turns it off, to measure the evaluation wall with and without it side by side.
        "MKB_RUNNER_NVRTC_PCH": "0" if os.environ.get("MKB_NVRTC_PCH") == "0" else "1",
    }
    for name in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH"):
        if name in os.environ:
            env[name] = os.environ[name]
    if not on_gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def prepare_staging(staging: Path, on_gpu: bool) -> None:
    """The three directories of a kernel process's world, owned by the uid it will run as."""
    for name in ("input", "exchange", "scratch"):
        (staging / name).mkdir(parents=True, exist_ok=True)
    uid = runner_uid(on_gpu)
    if uid is not None:
        for name in ("exchange", "scratch"):
            os.chown(staging / name, uid, uid)
        os.chmod(staging / "input", 0o755)
        os.chmod(staging, 0o755)
