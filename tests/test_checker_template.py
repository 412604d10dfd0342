"""Checkers forked from a warm template (mkb_ray/judge/forking.py, checker/checker_template.py): a fork holds
exactly what a spawned checker would (its own descriptors, directory and environment, nothing of the template's),
judges the same, is killed and reaped like a child, and a pool whose template died goes on with spawned checkers."""
from __future__ import annotations

import os
import subprocess
import time

import psutil
import pytest

from mkb_ray.judge import CheckerPool, judge_kernel
from mkb_ray.judge.forking import CheckerTemplate, ForkedChild
from mkb_ray.judge.process import CheckerProcess, _die_with_parent, worker_env

from conftest import EXAMPLE_PROBLEM

pytestmark = pytest.mark.judge


def _open_fds(pid: int) -> set[int]:
    return {int(fd) for fd in os.listdir(f"/proc/{pid}/fd")}


def test_a_fork_holds_only_its_own_descriptors_directory_and_environment():
    template = CheckerTemplate(worker_env(), _die_with_parent)
    checker = CheckerProcess("cpu", kernel_process=False, template=template)
    try:
        assert isinstance(checker.process, ForkedChild)
        assert checker.warm(60), "the forked checker never said it was warm"
        pid = checker.process.pid
        assert psutil.Process(pid).ppid() == template.process.pid
        # stdin, stdout and stderr (the log), the result pipe; the warm pipe is closed once it said so. Not the
        # template's control socket, not the descriptors the parent passed at their old numbers.
        deadline = time.monotonic() + 10
        while _open_fds(pid) != {0, 1, 2, 3} and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _open_fds(pid) == {0, 1, 2, 3}, sorted(_open_fds(pid))
        assert os.readlink(f"/proc/{pid}/cwd") == checker.scratch.name
        environ = dict(item.split("=", 1) for item in
                       open(f"/proc/{pid}/environ", "rb").read().decode().split("\0") if "=" in item)
        assert environ["PYTHONPATH"] == worker_env()["PYTHONPATH"]
        assert os.getsid(pid) == pid, "a fork leads a session of its own (the group the judge kills)"
        assert checker.process.poll() is None
    finally:
        checker.close()
    assert checker.process.returncode == -9  # killed by the judge, reaped through the template
    template.close()
    assert template.process.wait(timeout=10) == 0


def test_forked_checkers_judge_and_a_closed_pool_keeps_its_template_for_a_taken_one(problems, fast_options):
    problem = problems.get(EXAMPLE_PROBLEM)
    pool = CheckerPool("cpu", spares=1, dsls=("tirx",))
    template = pool._template
    assert template is not None, "a CPU pool forks its checkers"
    taken = pool.take("cpu", "tirx")
    assert isinstance(taken.process, ForkedChild)
    verdict = judge_kernel(problem, problem.solutions["tirx_cpu"], "tirx", "cpu", options=fast_options, pool=pool)
    assert verdict.tier in ("pass", "pass2x"), verdict.reason
    pool.close()
    assert template.process.poll() is None, "the template ended while a checker forked from it was still out"
    taken.close()
    assert template.process.wait(timeout=10) == 0


def test_a_pool_whose_template_died_spawns_its_checkers(problems, fast_options):
    problem = problems.get(EXAMPLE_PROBLEM)
    with CheckerPool("cpu", spares=0, dsls=("tirx",)) as pool:
        pool._template.process.kill()
        pool._template.process.wait()
        checker = pool.start_checker("cpu", ("tirx",))
        try:
            assert isinstance(checker.process, subprocess.Popen)
        finally:
            checker.close()
        verdict = judge_kernel(problem, problem.solutions["tirx_cpu"], "tirx", "cpu", options=fast_options,
                               pool=pool)
        assert verdict.tier in ("pass", "pass2x"), verdict.reason


def test_a_gpu_pool_on_a_gpu_host_spawns(monkeypatch):
    """CUDA does not survive fork: where a GPU executes, checkers are spawned."""
    import mkb_ray.judge.process as process

    monkeypatch.setattr(process, "gpu_arch", lambda: "sm_90a")
    with CheckerPool("cuda", spares=0) as pool:
        assert pool._template is None
    with CheckerPool("cpu", spares=0) as pool:
        assert pool._template is not None
