"""The workspace agent's shell sandbox (bubblewrap): what a command can and cannot reach, and its limits."""
from __future__ import annotations

import asyncio
import os
import shlex
import socket
import uuid
from pathlib import Path

import pytest

from mkb_ray.agents.sandbox import (SandboxLimits, WorkspaceFileError, build_bwrap_argv, default_policy,
                                    prepare_workspace, read_workspace_file, run_sandboxed)

pytestmark = pytest.mark.skipif(
    os.system("bwrap --version >/dev/null 2>&1") != 0,
    reason="bubblewrap is not installed (scripts/install-system.sh installs it)")


def run(command: str, workspace: Path, **limits: object):
    policy = default_policy(SandboxLimits(**{"wall_timeout_s": 20.0, **limits}))
    prepare_workspace(workspace, policy)
    return asyncio.run(run_sandboxed(command, workspace, policy))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


def _processes_with(marker: str) -> list[int]:
    """PIDs whose command line contains `marker` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_network_is_refused(workspace: Path) -> None:
    # A server listening on the host's loopback must be out of reach (own network namespace), as must any
    # outside address.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    probe = ("import socket\n"
             f"for host, port in (('127.0.0.1', {port}), ('1.1.1.1', 80)):\n"
             "    try:\n"
             "        socket.create_connection((host, port), timeout=3)\n"
             "        print('CONNECTED', host)\n"
             "    except OSError as err:\n"
             "        print('refused', host, err.errno)\n")
    try:
        result = run(f"python -c {shlex.quote(probe)}", workspace)
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()  # no connection is waiting
    finally:
        server.close()
    assert result.exit_code == 0, result.stderr
    assert "CONNECTED" not in result.stdout
    assert result.stdout.count("refused") == 2


def test_writes_outside_the_workspace_are_refused(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    scratch = f"/tmp/mkb-sandbox-{uuid.uuid4().hex}"
    result = run(f"echo inside > kernel.py; echo x > /etc/mkb-probe; echo x > /usr/mkb-probe; "
                 f"echo x > {outside}; echo private > {scratch} && cat {scratch}", workspace)
    assert (workspace / "kernel.py").read_text() == "inside\n"
    assert "Read-only file system" in result.stderr  # /etc, /usr
    assert not Path("/etc/mkb-probe").exists() and not Path("/usr/mkb-probe").exists()
    assert not outside.exists()  # the host's tmp_path does not exist inside
    assert "private" in result.stdout  # the sandbox has a /tmp of its own ...
    assert not Path(scratch).exists()  # ... which is not ours


def test_host_files_are_hidden_and_no_gpu(workspace: Path) -> None:
    repo = Path(__file__).resolve().parent.parent
    os.environ["MKB_SANDBOX_TEST_SECRET"] = "s3cret"
    try:
        result = run(f"ls {repo}/problems; ls /dev; ls /sys; env; id -u", workspace)
    finally:
        del os.environ["MKB_SANDBOX_TEST_SECRET"]
    assert "No such file or directory" in result.stderr  # the repository (and its solutions) is not there
    assert "solutions" not in result.stdout
    assert "nvidia" not in result.stdout
    assert "s3cret" not in result.stdout
    if os.geteuid() == 0:
        assert result.stdout.strip().splitlines()[-1] != "0"  # dropped to an unprivileged uid


def test_runaway_process_tree_is_killed(workspace: Path) -> None:
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}"
    # A busy loop, a background child and a child in its own session (escapes a process-group kill).
    command = f"sleep {marker} & setsid sleep {marker} & while :; do :; done"
    result = run(command, workspace, wall_timeout_s=2.0)
    assert result.timed_out and result.killed_for == "timeout"
    assert 1.9 < result.wall_s < 15
    assert _processes_with(f"sleep {marker}") == []


def test_cpu_time_limit(workspace: Path) -> None:
    # One CPU second takes a few wall seconds on a loaded machine: the wall timeout is far off, and the limit that
    # ended the command must be the CPU one (killed_for is "timeout" when the wall timeout fires first).
    wall_timeout_s = 120.0
    result = run("python -c 'while True: pass'", workspace, cpu_time_s=1, wall_timeout_s=wall_timeout_s)
    assert result.killed_for == "cpu_limit" and not result.timed_out
    assert result.wall_s < wall_timeout_s


def test_output_is_cut_and_flooding_is_killed(workspace: Path) -> None:
    result = run("seq 1 200000", workspace, kept_output_bytes=1000)
    assert result.exit_code == 0 and result.truncated
    assert result.stdout.startswith("1\n2\n") and result.stdout.rstrip().endswith("200000")
    assert "bytes omitted" in result.stdout
    assert result.stdout_bytes == len("".join(f"{i}\n" for i in range(1, 200001)))
    flood = run("yes", workspace, max_output_bytes=1 << 20, wall_timeout_s=20.0)
    assert flood.killed_for == "output_limit" and not flood.timed_out


def test_stdin_and_exit_code(workspace: Path) -> None:
    policy = default_policy()
    prepare_workspace(workspace, policy)
    result = asyncio.run(run_sandboxed("cat > note.txt; exit 3", workspace, policy, stdin_bytes=b"hello"))
    assert result.exit_code == 3
    assert (workspace / "note.txt").read_bytes() == b"hello"


def test_host_reads_of_workspace_files_do_not_follow_links(workspace: Path) -> None:
    run("ln -s /etc/passwd kernel.py; mkfifo pipe.py; mkdir dir.py; printf 'x%.0s' $(seq 1 50) > big.py",
        workspace)
    with pytest.raises(WorkspaceFileError, match="symbolic link"):
        read_workspace_file(workspace, "kernel.py", 1000)
    with pytest.raises(WorkspaceFileError, match="not a plain file"):
        read_workspace_file(workspace, "pipe.py", 1000)  # a FIFO would block a plain open()
    with pytest.raises(WorkspaceFileError):
        read_workspace_file(workspace, "dir.py", 1000)
    with pytest.raises(WorkspaceFileError, match="does not exist"):
        read_workspace_file(workspace, "missing.py", 1000)
    with pytest.raises(WorkspaceFileError):
        read_workspace_file(workspace, "../outside.py", 1000)
    big = read_workspace_file(workspace, "big.py", 10)
    assert len(big.data) == 11 and big.size_bytes == 50


def test_argv_shape(workspace: Path) -> None:
    argv = build_bwrap_argv("true", workspace, default_policy())
    assert "--unshare-net" in argv or "--unshare-all" in argv
    assert "--die-with-parent" in argv and "--new-session" in argv
    assert argv[argv.index("--bind") + 1] == str(workspace.resolve())
    assert "/dev" in argv[argv.index("--dev") + 1]
