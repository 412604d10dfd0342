"""problems/README.md is generated (and current); the roofline of a verdict, checked against hand arithmetic."""
from __future__ import annotations

import json
import shutil

import pytest

from mkb_ray.cli import main
from mkb_ray.judge.roofline import roofline
from mkb_ray.checker.problem_hash import problem_hash
from mkb_ray.problem_source import ExpressionError, evaluate_work
from mkb_ray.problem_table import read_validation, render
from mkb_ray.problems import load_problems

from conftest import REPO


def test_the_shipped_readme_is_what_the_generator_writes(capsys):
    assert main(["problems", "readme", "--check"]) == 0, capsys.readouterr().err
    text = (REPO / "problems" / "README.md").read_text()
    for problem in load_problems().problems:
        assert f"`{problem.problem_id}`" in text


def test_roofline_fractions_match_hand_arithmetic():
    # A 4096^3 bf16 GEMM: 2*4096^3 = 137.4 GFLOP, 3 * 4096^2 * 2 bytes = 100.7 MB. At 0.2 ms: 687.2 TFLOP/s =
    # 0.6946 of the H200's 989.4 dense bf16 peak; 0.503 TB/s = 0.1048 of 4.8 TB/s, so compute-bound.
    shapes = {"M": 4096, "N": 4096, "K": 4096}
    line = roofline("2 * M * N * K", "2 * (M * K + N * K + M * N)", "bf16_tensor", shapes, 0.2, 1.0,
                    "NVIDIA H200")
    assert line.bound == "compute" and line.fraction == pytest.approx(0.69459, rel=1e-4)
    assert line.achieved_tflops == pytest.approx(687.19, rel=1e-4)
    assert line.eager_fraction == pytest.approx(0.69459 / 5, rel=1e-4)
    # An 8192x8192 bf16 copy: 268.4 MB moved in 0.1 ms = 2.684 TB/s = 0.5592 of the H200's bandwidth.
    copy = roofline("0", "2 * 2 * R * C", "bf16_tensor", {"R": 8192, "C": 8192}, 0.1, None, "NVIDIA H200")
    assert copy.bound == "memory" and copy.fraction == pytest.approx(0.55924, rel=1e-4) and copy.eager_fraction is None
    # Unknown device, no time, or no stated work: no roofline rather than a made-up one.
    assert roofline("1", "1", "bf16_tensor", {}, 0.1, None, "NVIDIA A10") is None
    assert roofline("1", "1", "bf16_tensor", {}, None, None, "NVIDIA H200") is None
    assert roofline(None, None, "bf16_tensor", {}, 0.1, None, "NVIDIA H200") is None


def test_work_expressions_are_plain_arithmetic_only():
    assert evaluate_work("2 * (A + B) // 4 + (1 << 3)", {"A": 6, "B": 2}) == 12
    for bad in ("__import__('os')", "A.real", "[A]", "UNKNOWN * 2", "A +"):
        with pytest.raises(ExpressionError):
            evaluate_work(bad, {"A": 1})


def test_a_bad_work_expression_makes_the_problem_malformed(tmp_path):
    family = tmp_path / "mlp_norm"
    family.mkdir()
    shutil.copy(REPO / "problems" / "mlp_norm" / "01_fused_add_rmsnorm.py", family / "01_x.py")
    side = (REPO / "problems" / "mlp_norm" / "01_fused_add_rmsnorm.toml").read_text()
    (family / "01_x.toml").write_text(side.replace('flops = "', 'flops = "TOKEN * ', 1))
    problems = load_problems(tmp_path)
    assert not problems.problems and "01_x.toml: flops: 'TOKEN' is not a shape constant" in problems.errors[0].message


def test_records_count_only_for_the_problem_they_judged(tmp_path):
    problems = load_problems()
    rms = problems.get("mlp_norm/01_fused_add_rmsnorm")
    current = problem_hash(rms.path)

    def row(variant, speedup, phash):
        return {"problem_id": rms.problem_id, "variant": variant, "ok": True, "summary": "",
                "verdict": {"device": "cuda", "speedup": speedup, "eager_ms": 0.39, "problem_hash": phash}}

    record = tmp_path / "2099-01-01-h200-validate.json"
    record.write_text(json.dumps({"rows": [row("cutedsl", 7.77, current), row("tirx", 8.88, "0" * 64)]}))
    log = tmp_path / "2098-01-01-h200-validate.txt"
    log.write_text("validating 1 problems on cuda ...\n"
                   "ok mlp_norm/01_fused_add_rmsnorm tirx_cpu: correct on 7 draws; 1.50x eager (0.1 ms vs 0.15 ms, "
                   "net of the harness's 0.1 ms round trip)\n")
    assert [(pid, v, m.speedup, m.device) for pid, v, m in read_validation(log)] == [
        (rms.problem_id, "tirx_cpu", 1.5, "cuda")]
    text = render(problems, [log, record], "test")
    line = next(x for x in text.splitlines() if f"`{rms.problem_id}`" in x)
    assert "7.77x" in line and "8.88x" not in line and "1.50x" in line  # the stale tirx record is not shown
    assert "| 0.39 ms |" in line

    # A pass whose speed the judge could not resolve is verified, without a speedup.
    unresolved = row("tirx", None, current)
    unresolved["verdict"]["timing_resolved"] = False
    failed = {**row("cutedsl", None, current), "ok": False}
    later = tmp_path / "2100-01-01-h200-validate.json"
    later.write_text(json.dumps({"rows": [unresolved, failed]}))
    line = next(x for x in render(problems, [log, record, later], "test").splitlines() if f"`{rms.problem_id}`" in x)
    assert "| 7.77x | unresolved |" in line  # the failed row is no record: the older cutedsl pass stays


def test_a_later_record_of_a_stale_file_does_not_hide_a_current_one(tmp_path):
    """A resumed report keeps rows judged before the problem file changed; it sorts later than a record of the
    current file and must not blank that record's cell."""
    problems = load_problems()
    rms = problems.get("mlp_norm/01_fused_add_rmsnorm")

    def report(name, speedup, phash):
        path = tmp_path / name
        path.write_text(json.dumps({"rows": [{"problem_id": rms.problem_id, "variant": "tirx", "ok": True,
                                              "summary": "", "verdict": {"device": "cuda", "speedup": speedup,
                                                                         "eager_ms": 0.39, "problem_hash": phash}}]}))
        return path

    current = report("2099-01-01-h200-validate-one.json", 4.44, problem_hash(rms.path))
    stale = report("2099-01-01-h200-validate.json", 9.99, "0" * 64)
    line = next(x for x in render(problems, [current, stale], "test").splitlines() if f"`{rms.problem_id}`" in x)
    assert "4.44x" in line and "9.99x" not in line
