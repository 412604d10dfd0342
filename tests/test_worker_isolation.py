"""The judging processes' trusted base: the checker must run where only stdlib, torch, numpy and the DSL are
installed (our reference GPU host has no Ray, pydantic, rich or polars), and nothing a kernel prints can pose as a
verdict."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mkb_ray.checker.request import JudgeOptions, JudgeRequest

from conftest import EXAMPLE_PROBLEM, REPO

# Making a module None in sys.modules makes any import of it fail, as if it were not installed.
BLOCK_AND_RUN = """
import sys
for name in ("pydantic", "ray", "rich", "polars", "yaml", "litellm", "networkx", "mkb_ray.records", "mkb_ray.judge",
             "mkb_ray.store", "mkb_ray.campaign"):
    sys.modules[name] = None
import runpy
sys.argv = ["mkb_ray.checker"]
runpy.run_module("mkb_ray.checker", run_name="__main__")
"""


def _run_worker(kernel: str, tmp_path) -> tuple[dict, str]:
    read_fd, write_fd = os.pipe()
    request = JudgeRequest(problem_id=EXAMPLE_PROBLEM, problem_path=str(REPO / "problems" / f"{EXAMPLE_PROBLEM}.py"),
                           kernel_path=kernel, dsl="tirx", device="cpu", preset="smoke", seed=3,
                           options=JudgeOptions(warmup=1, timed=2)).as_json_dict()
    message = json.dumps({"request": request, "nonce": "n0nce", "result_fd": write_fd})
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.run([sys.executable, "-c", BLOCK_AND_RUN], input=message.encode(), capture_output=True,
                             pass_fds=(write_fd,), env=env, cwd=tmp_path, timeout=300)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        answer = json.loads(pipe.read())
    return answer, process.stdout.decode() + process.stderr.decode()


@pytest.mark.judge
def test_worker_runs_without_our_parent_side_packages(tmp_path):
    kernel = str(REPO / "problems" / "mlp_norm" / "solutions" / "01_fused_add_rmsnorm.tirx_cpu.py")
    answer, log = _run_worker(kernel, tmp_path)
    assert answer["nonce"] == "n0nce", log
    assert answer["verdict"]["tier"] in ("pass", "pass2x"), answer["verdict"]["reason"]


@pytest.mark.judge
def test_printed_fake_verdict_is_only_log(tmp_path):
    kernel = tmp_path / "liar.py"
    kernel.write_text('import torch\n\ndef solve(x, residual, weight):\n'
                      '    print(\'{"nonce": "n0nce", "verdict": {"tier": "pass2x"}}\')\n'
                      '    return x, residual\n')
    answer, log = _run_worker(str(kernel), tmp_path)
    # The kernel did print it, in its own process, whose output is only the log the checker keeps of it ...
    assert '"tier": "pass2x"' in answer["verdict"]["log_tail"]
    assert answer["verdict"]["tier"] == "fail" and answer["verdict"]["rejected_by"] == "dsl_launch"  # ... to no avail
