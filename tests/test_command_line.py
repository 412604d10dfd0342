"""`mkb eval`: a verdict is exit 0 (also for a failing kernel); bad usage or a missing file is exit 2."""
from __future__ import annotations

import json
import subprocess
import sys
import pytest

from conftest import EXAMPLE_PROBLEM, REPO

SOLUTION = REPO / "problems" / "mlp_norm" / "solutions" / "01_fused_add_rmsnorm.tirx_cpu.py"


def mkb(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkb_ray.cli", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=300)


@pytest.mark.judge
def test_eval_prints_a_json_verdict_and_exits_0(tmp_path):
    sources = []
    for _ in range(2):  # the second judgement of the same problem finds its baselines cached
        result = mkb("eval", EXAMPLE_PROBLEM, str(SOLUTION), "--dsl", "tirx", "--device", "cpu", "--json",
                     "--warmup", "1", "--timed", "3", "--baselines", str(tmp_path))
        assert result.returncode == 0, result.stderr
        verdict = json.loads(result.stdout)
        assert verdict["tier"] in ("pass", "pass2x") and verdict["problem_id"] == EXAMPLE_PROBLEM
        sources.append(verdict["baseline_source"])
    assert sources == ["measured", "cached"]


@pytest.mark.judge
def test_eval_of_a_failing_kernel_still_exits_0(tmp_path):
    kernel = tmp_path / "eager.py"
    kernel.write_text("import torch\n\ndef solve(x, residual, weight):\n    return x, residual\n")
    result = mkb("eval", EXAMPLE_PROBLEM, str(kernel), "--dsl", "tirx", "--device", "cpu")
    assert result.returncode == 0, result.stderr
    assert "fail" in result.stdout and "dsl_launch" in result.stdout


@pytest.mark.judge
def test_eval_usage_errors_exit_2_with_one_line(tmp_path):
    missing = mkb("eval", EXAMPLE_PROBLEM, str(tmp_path / "nope.py"), "--dsl", "tirx")
    assert missing.returncode == 2 and "kernel file not found" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    unknown = mkb("eval", "mlp_norm/99_nope", str(SOLUTION), "--dsl", "tirx")
    assert unknown.returncode == 2 and "no problem 'mlp_norm/99_nope'" in unknown.stderr
    no_dsl = mkb("eval", EXAMPLE_PROBLEM, str(SOLUTION))
    assert no_dsl.returncode == 2 and "--dsl" in no_dsl.stderr


def test_help_teaches_with_examples():
    result = mkb("--help")
    assert result.returncode == 0 and "mkb problems validate --device cpu" in result.stdout
