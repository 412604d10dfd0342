"""`mkb problems validate --report F --resume`: the report is written row by row and a cut-short run goes on from it.

One small problem on the CPU target (its screens and the tirx_cpu solution), judged for real.
"""
from __future__ import annotations

import json
import subprocess
import sys
import pytest
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROBLEM = "mlp_norm/02_silu_and_mul"


def validate(report: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkb_ray.cli", "problems", "validate", "--device", "cpu",
                           "--problem", PROBLEM, "--target", "cpu", "--report", str(report), *extra],
                          capture_output=True, text=True, cwd=REPO, timeout=600)


def rows_of(report: Path) -> list[dict]:
    return json.loads(report.read_text())["rows"]


@pytest.mark.judge
def test_resume_keeps_finished_problems_and_validates_cut_short_ones(tmp_path: Path):
    report = tmp_path / "validate.json"
    first = validate(report)
    assert first.returncode == 0, first.stdout + first.stderr
    written = json.loads(report.read_text())
    assert written["complete"] is True and written["ok"] is True
    assert [(r["problem_id"], r["variant"]) for r in written["rows"]] == [(PROBLEM, "screens"), (PROBLEM, "tirx_cpu")]
    seed = written["rows"][1]["verdict"]["seed"]

    # Finished: nothing is judged again, the kept verdict (its seed) is the one reported.
    again = validate(report, "--resume")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "validating 0 problems" in again.stdout and "1 already in" in again.stdout
    assert rows_of(report)[1]["verdict"]["seed"] == seed

    # Cut short after the screens row (as a timeout leaves it): the problem is validated again, once.
    cut = {**written, "complete": False, "rows": written["rows"][:1]}
    report.write_text(json.dumps(cut))
    resumed = validate(report, "--resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "validating 1 problems" in resumed.stdout
    rows = rows_of(report)
    assert [r["variant"] for r in rows] == ["screens", "tirx_cpu"]
    assert rows[1]["verdict"]["seed"] != seed and json.loads(report.read_text())["complete"] is True

    # A failed row is kept by --resume alone and judged again with --rerun-failed.
    failed = json.loads(report.read_text())
    failed["rows"][1]["ok"] = False
    report.write_text(json.dumps(failed))
    assert "validating 0 problems" in validate(report, "--resume").stdout
    report.write_text(json.dumps(failed))
    rerun = validate(report, "--resume", "--rerun-failed")
    assert rerun.returncode == 0 and "validating 1 problems" in rerun.stdout, rerun.stdout + rerun.stderr
    assert all(r["ok"] for r in rows_of(report))


@pytest.mark.judge
def test_resume_needs_a_report_and_refuses_a_foreign_file(tmp_path: Path):
    no_report = subprocess.run([sys.executable, "-m", "mkb_ray.cli", "problems", "validate", "--resume"],
                               capture_output=True, text=True, cwd=REPO, timeout=120)
    assert no_report.returncode == 2 and "--resume needs --report" in no_report.stderr
    foreign = tmp_path / "other.json"
    foreign.write_text('{"something": "else"}')
    refused = validate(foreign, "--resume")
    assert refused.returncode == 2 and str(foreign) in refused.stderr and "not a validate report" in refused.stderr


def test_a_problem_short_of_device_memory_is_told_apart_from_a_failing_solution():
    """`validate --jobs N` on a GPU validates a problem again alone when one of its rows ran out of device memory
    beside another job (what the H100 run of 2026-12-05 hit); these are the verdict messages it goes by."""
    from mkb_ray.judge.validate import ValidationRow, short_of_device_memory

    def row(ok: bool, summary: str) -> ValidationRow:
        return ValidationRow("attention/18_rope_fused_decode", "cutedsl", ok, summary)

    torch_oom = "solve raised OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total"
    driver_oom = "AcceleratorError: CUDA error: out of memory"
    assert short_of_device_memory([row(True, "3 screens hold"), row(False, torch_oom)])
    assert short_of_device_memory([row(False, driver_oom)])
    assert not short_of_device_memory([row(False, "output 0 mismatch: max abs err 3.1 at [0, 5]")])
    # The judge's own memory limit on the process tree is the kernel's fault, not the neighbour's.
    assert not short_of_device_memory([row(False, "killed: resident memory exceeded 32768 MiB")])
    assert not short_of_device_memory([row(True, torch_oom)])
