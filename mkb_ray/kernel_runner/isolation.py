"""Linux primitives a forked kernel process uses to wall itself off from its template and its siblings (stdlib and
ctypes only: this runs inside the sandbox, before any candidate code).

`enter_own_namespaces` runs in the fork's first process (the monitor): a user namespace of its own (the same uid,
never root), with a mount, PID, network, IPC and UTS namespace owned by it; in the mount namespace its own three
directories replace the template's, the directory of every sibling's is covered by an empty tmpfs, and /tmp and
/dev/shm are fresh. The process that will import the candidate (PID 1 of the new PID namespace) then mounts a
/proc of its namespace (`enter_own_proc`: no other process is visible there) and `drop_privileges` clears the
bounding, ambient, permitted and effective capability sets and sets `no_new_privs`, so nothing it runs can undo a
mount (and uncover a sibling) or gain a privilege back through exec.
"""
from __future__ import annotations

import ctypes
import os
import re
from typing import Optional

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_MOVE = 1, 2, 4, 8, 32, 8192
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 18, 1 << 21
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522

# statvfs flags that a remount inside a user namespace must keep (the kernel locks them), as mount flags.
_LOCKED_FLAGS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
                 (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))


class IsolationError(OSError):
    """A step of the isolation failed: the fork must not run a candidate."""


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return libc


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise IsolationError(errno, f"{what}: {os.strerror(errno)}")


def prctl(option: int, arg: int = 0) -> None:
    _check(_libc().prctl(option, arg, 0, 0, 0), f"prctl({option})")


def die_with_parent() -> None:
    prctl(PR_SET_PDEATHSIG, 9)


def _mount(source: Optional[str], target: str, fstype: Optional[str], flags: int, data: Optional[str] = None
           ) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(_libc().mount(enc(source), enc(target), enc(fstype), flags, enc(data)),
           f"mount {source or fstype} on {target}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def enter_own_namespaces(kid_dir: str, sandbox_root: str, kids_mount: str) -> None:
    """Unshare every namespace and rebuild the filesystem view for one kid (`kid_dir` holds its input, exchange and
    scratch). The next fork of the caller is PID 1 of the new PID namespace."""
    uid, gid = os.getuid(), os.getgid()
    if uid == 0:
        raise IsolationError(1, "a forked kernel process must not be root in its template's namespace")
    _check(_libc().unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS),
           "unshare")
    # The same uid and gid inside: not root, so an exec never gains the namespace's capabilities.
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
    _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here propagates back to the template
    for name, read_only in (("input", True), ("exchange", False), ("scratch", False)):
        source, target = os.path.join(kid_dir, name), os.path.join(sandbox_root, name)
        _mount(source, target, None, MS_BIND)
        if read_only:
            locked = os.statvfs(target).f_flag
            keep = 0
            for st_flag, ms_flag in _LOCKED_FLAGS:
                if locked & st_flag:
                    keep |= ms_flag
            _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | keep)
    _mount("tmpfs", kids_mount, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=64k")
    for path in ("/tmp", "/dev/shm"):
        _fresh_tmpfs(path, workspace=kids_mount)


def _fresh_tmpfs(top: str, workspace: str) -> None:
    """An empty tmpfs on `top`, with the sandbox's own mounts under it (a checkout or a virtualenv in /tmp, bound
    read-only) carried over: each is bound aside into `workspace` first, then moved to its place again."""
    inner: list[str] = []
    for point in sorted(_mount_points(), key=len):
        if point.startswith(top.rstrip("/") + "/") and not any(point.startswith(kept + "/") for kept in inner):
            inner.append(point)
    held = []
    for number, point in enumerate(inner):
        hold = os.path.join(workspace, f"held-{number}")
        os.mkdir(hold)
        _mount(point, hold, None, MS_BIND | MS_REC)
        held.append((hold, point))
    _mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    for hold, point in held:
        os.makedirs(point, mode=0o755, exist_ok=True)
        _mount(hold, point, None, MS_MOVE)  # a bind of ours moves; the read-only locks of what it holds stay
        os.rmdir(hold)


def _mount_points() -> list[str]:
    """Every mount point of this mount namespace, as /proc/self/mountinfo names it (octal escapes decoded)."""
    with open("/proc/self/mountinfo") as info:
        return [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4]) for line in info]


def enter_own_proc(host_proc: str) -> None:
    """In PID 1 of the new PID namespace: a /proc that shows this namespace only, and the host's /proc (which the
    template holds only so that this mount is allowed: the kernel mounts a new proc in a user namespace only where
    a fully visible one exists) covered."""
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _mount("tmpfs", host_proc, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=4k")


def drop_privileges() -> None:
    """No capability left in any set and none to regain (through exec, or a setuid file)."""
    libc = _libc()
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        prctl(PR_CAPBSET_DROP, cap)
    _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable for both 32-bit halves: all zero
    _check(libc.capset(header, data), "capset")
    with open("/proc/self/status") as f:
        caps = {line.split(":")[0]: int(line.split()[1], 16) for line in f if line.startswith("Cap")}
    if any(caps.get(name) for name in ("CapEff", "CapPrm", "CapBnd", "CapAmb")):
        raise IsolationError(1, f"capabilities left after dropping them: {caps}")
