"""The warm pool's readiness signal: a spare says it is warm only once its imports and its kernel process are up."""
from __future__ import annotations

import os
import signal

import psutil

from mkb_ray.judge import CheckerPool
from mkb_ray.judge.process import CheckerProcess


def test_spare_says_warm_once_its_kernel_process_is_up():
    with CheckerPool("cpu", spares=1) as pool:
        assert pool.wait_warm(120), "a healthy spare never said it was warm"
        spare = pool._ready[0]
        assert spare.alive() and spare.warm(), "warm is not sticky"
        # The kernel process (bubblewrap and the runner under it) runs beside the waiting checker.
        children = psutil.Process(spare.process.pid).children(recursive=True)
        assert any("kernel_runner" in " ".join(c.cmdline()) for c in children), [c.cmdline() for c in children]


def test_checker_that_dies_while_starting_is_never_warm():
    checker = CheckerProcess("cpu")
    try:
        os.killpg(checker.process.pid, signal.SIGKILL)
        checker.process.wait(timeout=10)
        assert checker.warm(5) is False
    finally:
        checker.close()


def test_pool_without_spares_has_nothing_warm():
    with CheckerPool("cpu", spares=0) as pool:
        assert pool.wait_warm(1) is False
