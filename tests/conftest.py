"""Shared fixtures. Everything here runs on a CPU-only machine; GPU-only tests carry the `gpu` marker."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from mkb_ray.cli import PROCESS_ENV

# Where the pytest process starts, as `mkb` does where its process starts (litellm reads these once, at import);
# Ray workers and servers the tests start inherit them.
os.environ.update(PROCESS_ENV)

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_PROBLEM = "mlp_norm/01_fused_add_rmsnorm"


def has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (sm_90a); this machine has none")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def problems():
    from mkb_ray.problems import load_problems

    return load_problems()


@pytest.fixture(scope="session")
def fast_options():
    """Fewer timed draws than the MKB protocol: tests check behaviour, not speed."""
    from mkb_ray.judge import JudgeOptions

    return JudgeOptions(warmup=2, timed=5)


@pytest.fixture(scope="session")
def checker_pool():
    """Warm checkers for the CPU target, shared by the tests that judge many kernels."""
    from mkb_ray.judge import CheckerPool

    with CheckerPool("cpu", spares=1) as pool:
        yield pool


@pytest.fixture(scope="session")
def baseline_cache(tmp_path_factory):
    """One baseline cache for the session, as a run directory would have."""
    return tmp_path_factory.mktemp("baselines")


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray on loopback only (never the machine's other interfaces)."""
    from mkb_ray.models.local_ray import init_local_ray

    init_local_ray(num_cpus=2)
    import ray

    yield ray
    ray.shutdown()
