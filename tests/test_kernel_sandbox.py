"""The kernel process's OS sandbox, tried from the inside: a kernel that looks for the checker, the network, the
repository and a way to outlive its judgement finds none of them (problems/CONTRACT.md, "Trust model")."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from mkb_ray.judge import JudgeOptions, judge_kernel

from conftest import EXAMPLE_PROBLEM, REPO

pytestmark = pytest.mark.judge  # every test here judges a kernel (the last one in a judging parent it starts)

HONEST = (REPO / "problems" / "mlp_norm" / "solutions" / "01_fused_add_rmsnorm.tirx_cpu.py").read_text()
OPTIONS = JudgeOptions(warmup=2, timed=5, skip_static_checks=True)  # the OS, not the source rules, is under test


def _kernel(tmp_path, prologue: str, name: str = "kernel.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(prologue) + "\n" + HONEST)
    return path


def test_kernel_process_sees_no_checker_network_or_repository(problems, tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    # At import, list every escape that works; solve then raises with the list, so a pass means none did.
    kernel = _kernel(tmp_path, f"""
        import os, socket
        ESCAPES = []
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
            ESCAPES.append("connected to the host's loopback")
        except OSError:
            pass
        for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
            try:
                command = open(f"/proc/{{pid}}/cmdline", "rb").read()
            except OSError:
                continue
            if b"checker" in command or b"pytest" in command:
                ESCAPES.append(f"sees process {{pid}}: {{command[:80]!r}}")
        if os.path.exists({str(REPO / "problems")!r}) or os.path.exists({str(REPO / "tests")!r}):
            ESCAPES.append("sees the repository's problems or tests")
        for target in ({str(REPO / "mkb_ray" / "written_by_kernel")!r}, "/etc/written_by_kernel"):
            try:
                open(target, "w").close()
                ESCAPES.append(f"wrote {{target}}")
            except OSError:
                pass
        if os.getuid() == 0:
            ESCAPES.append("runs as root on the CPU target")
    """)
    kernel.write_text(kernel.read_text().replace(
        "def solve(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor):",
        "def solve(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor):\n"
        "    if ESCAPES:\n        raise RuntimeError('escaped: ' + '; '.join(ESCAPES))"))
    verdict = judge_kernel(problems.get(EXAMPLE_PROBLEM), kernel, "tirx", "cpu", options=OPTIONS)
    assert verdict.tier in ("pass", "pass2x"), verdict.reason
    try:
        listener.accept()
        raise AssertionError("the kernel process reached a socket of the host")
    except BlockingIOError:
        pass
    finally:
        listener.close()
    assert not (REPO / "mkb_ray" / "written_by_kernel").exists()


def _processes_running(argv: list[str]) -> list[int]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if process.info["cmdline"] == argv:
            found.append(process.pid)
    return found


def test_a_forked_session_leader_does_not_outlive_the_verdict(problems, tmp_path):
    marker = ["sleep", "4242.5"]
    kernel = _kernel(tmp_path, f"""
        import os
        if os.fork() == 0:
            os.setsid()  # out of every process group the judge could kill
            os.execv("/usr/bin/sleep", {marker!r})
    """)
    verdict = judge_kernel(problems.get(EXAMPLE_PROBLEM), kernel, "tirx", "cpu", options=OPTIONS)
    assert verdict.tier in ("pass", "pass2x", "fail"), verdict.reason
    # Reaping the sandbox's processes can take a while on a loaded machine; the loop ends as soon as they are gone.
    deadline = time.monotonic() + 30
    while _processes_running(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _processes_running(marker), "a process the kernel forked outlived its judgement"


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def _kernel_runners(pid: int) -> list[psutil.Process]:
    runners = []
    for process in psutil.Process(pid).children(recursive=True):
        try:
            if "mkb_ray.kernel_runner" in " ".join(process.cmdline()):
                runners.append(process)
        except psutil.Error:  # ended meanwhile
            continue
    return runners


def _progressing(runners: list[psutil.Process], window_s: float, min_cpu_s: float) -> list[psutil.Process]:
    """The runners that used at least `min_cpu_s` of CPU within `window_s`: running, however busy the machine
    (a share of a core a loaded machine still gives a busy loop), unlike a CPU percentage against a threshold."""
    before = {}
    for process in runners:
        try:
            before[process] = _cpu_s(process)
        except psutil.Error:
            continue
    time.sleep(window_s)
    progressing = []
    for process, cpu_s in before.items():
        try:
            if _cpu_s(process) - cpu_s >= min_cpu_s:
                progressing.append(process)
        except psutil.Error:
            continue
    return progressing


def test_killing_the_judging_parent_ends_checker_and_kernel_process(tmp_path):
    spinner = tmp_path / "spin.py"
    spinner.write_text("import torch\n\ndef solve(x, residual, weight):\n    while True:\n        pass\n")
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        from mkb_ray.problems import load_problems
        from mkb_ray.judge import JudgeLimits, judge_kernel
        judge_kernel(load_problems().get({EXAMPLE_PROBLEM!r}), {str(spinner)!r}, "tirx", "cpu",
                     limits=JudgeLimits(timeout_s=600))
    """)], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 300  # checker and kernel process start-up, slow on a loaded machine
        spinning: list[psutil.Process] = []
        while time.monotonic() < deadline and not spinning:
            time.sleep(1)
            spinning = _progressing(_kernel_runners(parent.pid), window_s=5.0, min_cpu_s=0.2)
        assert spinning, "the kernel process never started spinning"
        descendants = psutil.Process(parent.pid).children(recursive=True)
        parent.kill()
        parent.wait()
        gone, alive = psutil.wait_procs(descendants, timeout=60)  # returns as soon as all are gone
        assert not alive, f"still running after the judging parent died: {[p.cmdline()[:4] for p in alive]}"
    finally:
        if parent.poll() is None:
            parent.kill()


