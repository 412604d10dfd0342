"""The whole shipped suite through the judge on this CPU: every screen holds, every CPU-target TIRx solution
executes and passes, every GPU solution (both DSLs) compiles to sm_90a PTX."""
from __future__ import annotations

import pytest

from mkb_ray.judge.validate import validate

from conftest import has_gpu


@pytest.mark.judge
def test_every_shipped_solution_is_judged_as_expected(problems, fast_options):
    if has_gpu():
        pytest.skip("on a GPU host the GPU solutions execute: .ci/gpu-check runs `mkb problems validate --device cuda`")
    # Two problems at a time: compiles dominate and overlap on CI's 2 cores; this test checks verdicts, not speed.
    rows = validate(problems, "cpu", options=fast_options, jobs=2)
    failed = [(r.problem_id, r.variant, r.summary) for r in rows if not r.ok]
    assert not failed, failed
    by_variant = {}
    for row in rows:
        by_variant.setdefault(row.variant, []).append(row)
    count = len(problems.problems)
    assert [r.problem_id for r in rows if r.variant == "screens"] == [p.problem_id for p in problems.problems]
    assert count >= 12 and {k: len(v) for k, v in by_variant.items()} == {
        "screens": count, "cutedsl": count, "tirx": count, "tirx_cpu": count}
    for row in by_variant["tirx_cpu"]:
        v = row.verdict
        assert v.executed and v.correct and v.tier in ("pass", "pass2x") and v.target == "llvm", row.problem_id
        assert v.kernel_ms > 0 and v.eager_ms > 0
    for row in by_variant["cutedsl"] + by_variant["tirx"]:
        v = row.verdict
        assert v.tier == "compile_only" and v.target == "sm_90a" and not v.executed, row.problem_id
        assert all(c.ptx_bytes > 0 for c in v.compiles) and v.compiles
        # Each compile names the device kernels it produced (what will tie a profiled kernel to the DSL).
        assert all(c.kernels for c in v.compiles), (row.problem_id, row.variant)
    for row in by_variant["screens"]:
        names = {c.name for c in row.checks}
        assert {"zeros_fail", "seed_changes_output", "not_constant"} <= names, row.problem_id
