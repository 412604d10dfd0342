"""bubblewrap's command line, in the pieces both of our sandboxes are built from: a kernel process's (`sandbox.py`
here) and an agent's shell command's (`mkb_ray.agents.sandbox`). Each sandbox decides what it mounts; this module
says once how a mount, a made directory or a dropped uid is written.

Standard library only: the checker imports it on bare GPU hosts, and the agents' side imports it from here (a layer
below theirs) rather than the checker reaching up into agent code.
"""
from __future__ import annotations

import os
from typing import Optional, Sequence

# Top-level system directories that usrmerge systems make symlinks into /usr.
USRMERGE_TOPS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def system_dirs(extra_tops: Sequence[str] = ()) -> list[str]:
    """The host's base system: /usr and /etc, plus /bin, /lib, ... (and `extra_tops`) where they are real
    directories (on usrmerge systems they are symlinks, recreated by `base_argv`)."""
    return ["/usr", "/etc"] + [top for top in (*USRMERGE_TOPS, *extra_tops)
                               if os.path.isdir(top) and not os.path.islink(top)]


def under(path: str, roots: Sequence[str]) -> bool:
    """Whether `path` is one of `roots` or lies below one."""
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def mount_point_dirs(mounts: Sequence[str]) -> list[str]:
    """The parent directories bubblewrap must create for `mounts` (none below another mount), shallowest first."""
    parents: set[str] = set()
    for mount in mounts:
        parent = os.path.dirname(mount.rstrip("/"))
        while parent not in ("/", "") and not under(parent, mounts):
            parents.add(parent)
            parent = os.path.dirname(parent)
    return sorted(parents, key=lambda p: (p.count("/"), p))


def base_argv(bwrap: str, read_only: Sequence[str], later_mounts: Sequence[str] = (),
              made_dirs: Sequence[str] = (), tmp_bytes: Optional[int] = None) -> list[str]:
    """`bwrap` with a fresh /dev and /proc, a private /tmp and /dev/shm (`tmp_bytes` large, where bubblewrap can cap
    them), `read_only` bound at their own paths and the usrmerge symlinks. The mount points of `read_only` and of
    the `later_mounts` the caller adds next, then `made_dirs`, are created 0755 explicitly: bubblewrap copies the
    host's mode, and a 0700 /root would hide a Python installed under /root/.pyenv from an unprivileged uid."""
    size = ["--size", str(tmp_bytes)] if tmp_bytes is not None else []
    # The tmpfs first: a bind below /tmp (a venv in a checkout under /tmp, as CI may have) must land on top of it,
    # not be hidden by it.
    argv = [bwrap, "--dev", "/dev", "--proc", "/proc",
            "--perms", "01777", *size, "--tmpfs", "/tmp",
            "--perms", "01777", *size, "--tmpfs", "/dev/shm"]
    for made in mount_point_dirs([*read_only, *later_mounts]) + list(made_dirs):
        argv += ["--perms", "0755", "--dir", made]
    for path in read_only:
        argv += ["--ro-bind", path, path]
    for top in USRMERGE_TOPS:
        if os.path.islink(top) and top not in read_only:
            argv += ["--symlink", os.readlink(top), top]
    return argv


def drop_to_uid(setpriv: str, uid: int) -> list[str]:
    """The end of a root bubblewrap's options and a `setpriv` that runs what follows as `uid` (and gid): no groups,
    no capabilities, no new privileges. Without a user namespace (as root one could not map another uid into it),
    setpriv needs exactly these two capabilities to switch uid, and then clears every capability set."""
    return ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--",
            setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs"]
