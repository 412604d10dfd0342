"""The warm pool's readiness signal: a spare says it is warm only once its imports and its kernel process are up."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest

from mkb_ray.judge import CheckerPool
from mkb_ray.judge.kernel_template import monitor_pid
from mkb_ray.judge.process import CheckerProcess


@pytest.mark.judge
def test_spare_says_warm_once_its_kernel_process_is_up():
    with CheckerPool("cpu", spares=2) as pool:
        assert pool.wait_warm(120, every=True), "a healthy spare never said it was warm"
        assert all(spare.warm() for spare in pool._ready) and len(pool._ready) == 2, "every=True left one cold"
        spare = pool._ready[0]
        assert spare.alive() and spare.warm(), "warm is not sticky"
        # The kernel process runs beside the waiting checker: under it (bubblewrap and the runner), or forked from
        # the pool's kernel template (a monitor and the runner under it).
        if spare.kernel_pidfd is not None:
            monitor = psutil.Process(monitor_pid(spare.kernel_pidfd))
            tree = [monitor, *monitor.children(recursive=True)]
        else:
            tree = psutil.Process(spare.process.pid).children(recursive=True)
        assert len(tree) >= 2 and any("kernel_runner" in " ".join(c.cmdline()) for c in tree), \
            [c.cmdline() for c in tree]


@pytest.mark.judge
def test_checker_that_dies_while_starting_is_never_warm():
    checker = CheckerProcess("cpu")
    try:
        os.killpg(checker.process.pid, signal.SIGKILL)
        checker.process.wait(timeout=10)
        assert checker.warm(5) is False
    finally:
        checker.close()


@pytest.mark.judge
def test_pool_without_spares_has_nothing_warm():
    with CheckerPool("cpu", spares=0) as pool:
        assert pool.wait_warm(1) is False


@pytest.mark.judge
def test_a_pool_for_one_dsl_warms_only_that_dsl_and_routes_the_other_to_a_fresh_checker():
    with CheckerPool("cpu", spares=1, dsls=("tirx",)) as pool:
        spare = pool._ready[0]
        assert spare.dsls == ("tirx",)
        assert spare.process.args[spare.process.args.index("--dsls") + 1] == "tirx"
        other = pool.take("cpu", "cutedsl")
        try:
            assert other is not spare and other.dsls == ("cutedsl",) and pool._ready == [spare]
        finally:
            other.close()
        assert pool.take("cpu", "tirx") is spare
        spare.close()


def test_the_sandbox_env_names_the_dsl_modules_and_a_baseline_imports_none():
    from mkb_ray.checker.sandbox import DSL_MODULES, SandboxLimits, sandbox_env
    from mkb_ray.kernel_runner.__main__ import KNOWN_DSL_MODULES

    assert set(KNOWN_DSL_MODULES) == set(DSL_MODULES.values())
    limits = SandboxLimits()
    assert sandbox_env(False, limits)["MKB_RUNNER_IMPORT_DSLS"] == "cutlass.cute,tvm"
    assert sandbox_env(False, limits, dsls=("tirx",))["MKB_RUNNER_IMPORT_DSLS"] == "tvm"
    baseline = sandbox_env(False, limits, role="baseline")
    assert baseline["MKB_RUNNER_IMPORT_DSLS"] == "" and baseline["MKB_RUNNER_PROFILER_WARMUP"] == "0"
    assert sandbox_env(False, limits)["MKB_RUNNER_PROFILER_WARMUP"] == "1"
    assert sandbox_env(False, limits, profiled=False)["MKB_RUNNER_PROFILER_WARMUP"] == "0"  # compile-only


def test_nvrtcs_precompiled_header_is_on_unless_the_judges_environment_turns_it_off(monkeypatch):
    from mkb_ray.checker.sandbox import SandboxLimits, sandbox_env

    monkeypatch.delenv("MKB_NVRTC_PCH", raising=False)
    assert sandbox_env(True, SandboxLimits())["MKB_RUNNER_NVRTC_PCH"] == "1"
    monkeypatch.setenv("MKB_NVRTC_PCH", "0")
    assert sandbox_env(True, SandboxLimits())["MKB_RUNNER_NVRTC_PCH"] == "0"


def test_importing_the_other_dsl_after_the_guard_is_set_trips_nothing():
    """Why a one-DSL kernel process is safe: a candidate that imports the other DSL itself changes no function the
    identity guard watches (else an honest kernel would be blamed for the import)."""
    script = (
        "import torch, torch.profiler\n"
        "with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True):\n"
        "    torch.ones(1).add_(1)\n"
        "from mkb_ray.kernel_runner.guards import IdentityGuard\n"
        "guard = IdentityGuard({})\n"
        "import tvm, cutlass.cute\n"
        "print('violations', guard.violations(full=True))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "violations []" in out.stdout, out.stdout


_ANSWERS_THEN_LINGERS = """
import json, os, sys, time
message = json.loads(sys.stdin.read())
with os.fdopen(int(message["result_fd"]), "w") as result:
    result.write(json.dumps({"nonce": message["nonce"], "verdict": {"tier": "pass"}}))
time.sleep(60)  # a checker whose exit (a CUDA context's teardown) takes long after its answer
"""


@pytest.mark.judge
def test_the_verdict_is_taken_when_the_answer_pipe_closes_not_at_the_checkers_exit(monkeypatch):
    """A spawned checker that has answered is not waited for: run() returns with the answer at once, and the
    checker is killed and reaped in the background."""
    import time

    import mkb_ray.judge.process as process_module

    class Lingering(subprocess.Popen):
        def __init__(self, argv, **kwargs):
            super().__init__([sys.executable, "-c", _ANSWERS_THEN_LINGERS], **kwargs)

    monkeypatch.setattr(process_module.subprocess, "Popen", Lingering)
    checker = CheckerProcess("cpu", kernel_process=False)
    # Waiting for the exit would run into the 30 s limit (killed_for 'timeout'), long before the checker's 60 s.
    outcome = checker.run({"mode": "judge", "request": {}}, process_module.JudgeLimits(timeout_s=30))
    assert outcome.payload == {"tier": "pass"} and outcome.killed_for is None and outcome.wall_s < 30
    deadline = time.monotonic() + 10
    while checker.process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert checker.process.returncode == -signal.SIGKILL
