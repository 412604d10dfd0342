"""The judge end to end on this machine: CPU-target kernels execute; GPU kernels compile to PTX only."""
from __future__ import annotations


import pytest

from mkb_ray.judge import judge_kernel
from mkb_ray.checker.pipeline import TIMING_AUDITS
from mkb_ray.checker.profiled_twins import TWIN_YARDSTICK
from mkb_ray.checker.work_share import PROFILED_CALLS_BEFORE_TIMING
from mkb_ray.judge import JudgeLimits

from conftest import EXAMPLE_PROBLEM, REPO

SOLUTIONS = REPO / "problems" / "mlp_norm" / "solutions"


@pytest.mark.judge
def test_cpu_target_solution_executes_and_passes(problems, fast_options):
    verdict = judge_kernel(problems.get(EXAMPLE_PROBLEM), SOLUTIONS / "01_fused_add_rmsnorm.tirx_cpu.py", "tirx",
                           "cpu", seed=11, options=fast_options)
    assert verdict.tier in ("pass", "pass2x"), verdict.reason
    assert verdict.compiled and verdict.executed and verdict.correct
    assert verdict.target == "llvm" and verdict.timing_method == "checker_roundtrip_wall_clock"
    assert verdict.timed_draws == 5 and verdict.harness_overhead_ms > 0
    assert verdict.kernel_roundtrip_ms == pytest.approx(verdict.kernel_ms + verdict.harness_overhead_ms, abs=1e-6)
    assert verdict.kernel_wall_ms == verdict.kernel_ms and verdict.late_draws is None  # CPU: the checker's clock only
    assert verdict.kernel_ms > 0 and verdict.eager_ms > 0 and verdict.timing_resolved is not None
    # A speedup is claimed only for a resolved time (a loaded CI host may leave this kernel within the noise).
    assert verdict.speedup == (pytest.approx(verdict.eager_ms / verdict.kernel_ms) if verdict.timing_resolved
                               else None)
    assert verdict.launches_per_call == 1 and verdict.problem_hash and verdict.seed == 11
    assert verdict.dsl_outputs_only is True
    # Every executed call's wall-time split is kept (CONTRACT.md): the first call, the correctness draws, one per
    # timed trip; a TIRx kernel doing all the work spends most of its call inside the launch.
    split = verdict.work_evidence["wall_split"]
    assert split["calls"] >= 1 + 4 + 2 + 7 and 0.0 < split["dsl_wall_share_median"] <= 1.0
    names = [c.name for c in verdict.checks]
    # 5 draws + 2 outlier draws + the knockout's probe draw + the profiled draw, and a probe and a profiled draw
    # for each audit between timed draws; each profiled draw also has its unprofiled twin, checked too
    assert names.count("correctness") == 9 + 2 * TIMING_AUDITS + (1 + TIMING_AUDITS)
    twins = verdict.work_evidence["profiled_twins"]
    assert len(twins["pairs_cpu_us"]) == 1 + TIMING_AUDITS and twins["median_ratio"] >= TWIN_YARDSTICK
    assert {"static", "knockout", "dsl_output", "decoration", "post_timing"} <= set(names)
    assert all(c.passed for c in verdict.checks)
    assert verdict.dsl_share is not None and verdict.dsl_share >= 0.5
    assert verdict.work_evidence["source"] == "aten_ops" and verdict.baseline_source == "measured"


@pytest.mark.judge
@pytest.mark.parametrize("dsl, suffix", [("cutedsl", "cutedsl"), ("tirx", "tirx")])
def test_gpu_solution_without_gpu_is_compile_only(problems, fast_options, dsl, suffix):
    verdict = judge_kernel(problems.get(EXAMPLE_PROBLEM), SOLUTIONS / f"01_fused_add_rmsnorm.{suffix}.py", dsl,
                           "cuda", options=fast_options)
    assert verdict.tier == "compile_only", verdict.reason
    assert verdict.compiled and not verdict.executed and verdict.correct is None
    assert verdict.target == "sm_90a" and verdict.compiles and all(c.ptx_bytes > 0 for c in verdict.compiles)
    assert "compile-only" in verdict.reason and "not executed" in verdict.reason
    # The kernels each compile produced, named as the profiler reports them (CuTe DSL's kernel_info keys; TVM's
    # extern "C" __global__ functions): what will tie a profiled kernel to the DSL.
    kernels = [name for c in verdict.compiles for name in c.kernels]
    expected = "kernel_cutlass_" if dsl == "cutedsl" else "fused_add_rmsnorm"
    assert kernels and all(name.startswith(expected) for name in kernels), kernels


@pytest.mark.judge
def test_compile_error_is_reported_with_the_dsl_message(problems, fast_options, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text((SOLUTIONS / "01_fused_add_rmsnorm.tirx_cpu.py").read_text().replace(
        'T.Cast("float32", W[j])', 'T.Cast("float32", W[j, j])'))
    verdict = judge_kernel(problems.get(EXAMPLE_PROBLEM), broken, "tirx", "cpu", options=fast_options)
    assert verdict.tier == "fail" and verdict.rejected_by == "compile" and not verdict.compiled
    assert "compile failed" in verdict.reason


@pytest.mark.judge
def test_wrong_kernel_fails_correctness_with_evidence(problems, fast_options, tmp_path):
    wrong = tmp_path / "wrong.py"
    wrong.write_text((SOLUTIONS / "01_fused_add_rmsnorm.tirx_cpu.py").read_text().replace(
        "acc[0] / T.float32(hidden)", "acc[0] / T.float32(hidden // 2)"))
    verdict = judge_kernel(problems.get(EXAMPLE_PROBLEM), wrong, "tirx", "cpu", options=fast_options)
    assert verdict.tier == "fail" and verdict.rejected_by == "correctness" and verdict.correct is False
    assert verdict.compiled and verdict.executed and "max|out-anchor|" in verdict.reason


@pytest.mark.judge
def test_worker_killed_by_the_timeout_gives_a_timeout_verdict(problems, fast_options, tmp_path):
    slow = tmp_path / "slow.py"
    slow.write_text("import torch\n\ndef solve(x, residual, weight):\n    while True:\n        pass\n")
    verdict = judge_kernel(problems.get(EXAMPLE_PROBLEM), slow, "tirx", "cpu", options=fast_options,
                           limits=JudgeLimits(timeout_s=8))
    assert verdict.rejected_by == "timeout" and verdict.tier == "fail" and 8 <= verdict.wall_s < 30


@pytest.mark.judge
@pytest.mark.gpu
@pytest.mark.parametrize("dsl, suffix", [("cutedsl", "cutedsl"), ("tirx", "tirx")])
def test_gpu_solution_passes_on_the_gpu_with_both_baselines(problems, dsl, suffix):
    from mkb_ray.judge import JudgeOptions

    verdict = judge_kernel(problems.get(EXAMPLE_PROBLEM), SOLUTIONS / f"01_fused_add_rmsnorm.{suffix}.py", dsl, "cuda",
                           options=JudgeOptions(compile_baseline=True))
    assert verdict.tier in ("pass", "pass2x"), verdict.reason
    assert verdict.executed and verdict.preset == "production" and verdict.target == "sm_90a"
    # The device's record decides (CUDA events around each call), held to the checker's own clock, kept beside it.
    assert verdict.timing_method == "cuda_events_led_l2_flushed_x5" and verdict.timed_draws == 50
    assert verdict.timing_resolved and verdict.late_draws == 0
    assert verdict.kernel_wall_ms and verdict.eager_wall_ms and verdict.kernel_roundtrip_ms > verdict.kernel_ms
    assert verdict.work_evidence["source"] == "cupti_kernels" and verdict.dsl_share >= 0.5
    assert verdict.torch_compile_ms and verdict.torch_compile_ms > 0 and verdict.eager_ms > 0
    assert "H" in (verdict.device_name or "")  # an H100/H200


@pytest.mark.judge
def test_partial_dsl_solution_is_accepted_and_labelled(problems, fast_options):
    kernel = REPO / "tests" / "kernels" / "partial_dsl_small_eager_part.py"
    verdict = judge_kernel(problems.get(EXAMPLE_PROBLEM), kernel, "tirx", "cpu", options=fast_options)
    assert verdict.tier in ("pass", "pass2x") and verdict.dsl_outputs_only is False, verdict.reason
    assert "computed by eager code" in verdict.reason and verdict.dsl_share >= 0.5
    note = next(c for c in verdict.checks if c.name == "dsl_output")
    assert "output(s) [1]" in note.detail


@pytest.mark.judge
def test_one_stalled_profiled_call_does_not_reject_an_honest_kernel(problems, fast_options):
    """The CI flake that made the rule a median: one profiled call whose eager part stalled read a DSL share of
    37 % and failed the judgement. The kernel stalls its eager part on the first profiled call only."""
    kernel = REPO / "tests" / "kernels" / "partial_dsl_one_stalled_call.py"
    verdict = judge_kernel(problems.get(EXAMPLE_PROBLEM), kernel, "tirx", "cpu", options=fast_options)
    assert verdict.tier in ("pass", "pass2x"), verdict.reason
    evidence = verdict.work_evidence
    assert evidence["lowest_call_share"] < 0.5, f"the stall missed the profiled call: {evidence}"
    # The low first call was followed by a second (and a third where the machine stalled that one too); each audit
    # profiles one call, more only while the median is below the bar. How many is the machine's business.
    assert 2 + TIMING_AUDITS <= evidence["profiled_calls"] <= PROFILED_CALLS_BEFORE_TIMING * (1 + TIMING_AUDITS)
    assert verdict.dsl_share >= 0.5
    first = next(c.detail for c in verdict.checks if c.name == "decoration")
    assert "the median of 2 profiled call(s)" in first or "the median of 3 profiled call(s)" in first, first


@pytest.mark.judge
def test_an_honest_kernel_that_picks_its_dsl_kernel_by_the_data_passes(problems, fast_options):
    """Two TIRx kernels taking their buffers in different orders, chosen per call by the sign of the first gate: the
    probe's launch and the knockout's launch at the same position are different kernels. Knockout and scramble used
    to poison by the probe's positions and hit the input (`input_mutated` for every seed tried)."""
    kernel = REPO / "tests" / "kernels" / "data_dependent_dispatch.tirx_cpu.py"
    verdict = judge_kernel(problems.get("mlp_norm/02_silu_and_mul"), kernel, "tirx", "cpu", seed=1,
                           options=fast_options)
    assert verdict.tier in ("pass", "pass2x"), verdict.reason
    knockouts = [c.detail for c in verdict.checks if c.name == "knockout"]
    assert knockouts and all("the outputs fail" in detail for detail in knockouts), knockouts


@pytest.mark.judge
@pytest.mark.gpu
@pytest.mark.parametrize("dsl", ["tirx", "cutedsl"])
def test_an_honest_gpu_kernel_that_picks_its_dsl_kernel_by_the_data_passes(problems, dsl):
    kernel = REPO / "tests" / "kernels" / f"data_dependent_dispatch.{dsl}.py"
    for seed in (1, 2):  # the first gate's sign differs between the probe's and the knockout's draws for some seeds
        verdict = judge_kernel(problems.get("mlp_norm/02_silu_and_mul"), kernel, dsl, "cuda", seed=seed)
        assert verdict.tier in ("pass", "pass2x"), verdict.reason
        assert verdict.timing_method == "cuda_events_led_l2_flushed_x5"


@pytest.mark.judge
def test_dsl_doing_the_small_part_is_decoration(problems, fast_options):
    """The reverse split: the DSL adds, eager PyTorch normalises. The profile shows PyTorch doing the work."""
    verdict = judge_kernel(problems.get(EXAMPLE_PROBLEM), REPO / "tests" / "kernels" / "partial_dsl_trivial_output.py",
                           "tirx", "cpu", options=fast_options)
    assert verdict.tier == "fail" and verdict.rejected_by == "decoration", verdict.reason
    assert "eager PyTorch did the work" in verdict.reason and "mean" in verdict.reason


# -- several timed draws per round trip ----------------------------------------------------------------------------

def test_draws_per_trip_divides_the_timed_draws_and_fits_the_bank_budget():
    from mkb_ray.checker.timing import BANK_BUDGET_BYTES, draws_per_trip

    assert draws_per_trip(5, 50, 1 << 20, on_gpu=True) == 5
    assert draws_per_trip(5, 48, 1 << 20, on_gpu=True) == 4  # 5 does not divide 48; 4 does
    assert draws_per_trip(5, 7, 1 << 20, on_gpu=False) == 1  # 7 is prime: one draw per trip
    assert draws_per_trip(5, 3, 1 << 20, on_gpu=False) == 3  # never more than the timed draws
    budget = BANK_BUDGET_BYTES[False]
    assert draws_per_trip(5, 50, budget // 2, on_gpu=False) == 2  # 5 or 4 banks would not fit, 2 do
    assert draws_per_trip(5, 50, budget, on_gpu=False) == 1


def test_a_timed_sample_is_its_trips_time_per_draw_and_every_draw_is_prepared_once():
    """Warm-up 3 and 10 timed draws in trips of 5: trips [0, 3) and [3, 8), [8, 13). The stub timer says a trip of k
    draws took 2k + 1 ms, so both timed samples are 11/5 = 2.2 ms per draw; the warm-up trip (7 ms) is not one."""
    from mkb_ray.checker.timing import time_draws

    class StubTimer:
        on_gpu = False
        flush_l2 = True

        def measure(self, call):
            count = call()
            return count, 2.0 * count + 1.0

    prepared, after = [], []
    result = time_draws(StubTimer(), prepared.append, lambda count: count, warmup=3, timed=10,
                        after_call=lambda trip, reply: after.append((trip, reply)), per_trip=5)
    assert prepared == [range(0, 3), range(3, 8), range(8, 13)]
    assert after == [(range(0, 3), 3), (range(3, 8), 5), (range(8, 13), 5)]
    wall = result.wall
    assert result.device is None  # the CPU target: the checker's clock decides
    assert wall.median_ms == pytest.approx(2.2) and wall.min_ms == pytest.approx(2.2)
    assert wall.samples == 10 and wall.method == "checker_roundtrip_wall_clock_x5"
    with pytest.raises(ValueError, match="round trips of 4"):
        time_draws(StubTimer(), prepared.append, lambda count: count, warmup=0, timed=10, per_trip=4)


@pytest.mark.judge
def test_a_cpu_target_solution_passes_with_five_draws_per_round_trip(problems):
    """The GPU default, exercised on the CPU target: 2 warm-up draws in one trip, 10 timed draws in two trips of 5
    (each draw in its own bank), every re-checked draw compared from its own bank."""
    from mkb_ray.judge import JudgeOptions

    verdict = judge_kernel(problems.get(EXAMPLE_PROBLEM), SOLUTIONS / "01_fused_add_rmsnorm.tirx_cpu.py", "tirx",
                           "cpu", seed=5, options=JudgeOptions(warmup=2, timed=10, draws_per_trip=5))
    assert verdict.tier in ("pass", "pass2x"), verdict.reason
    assert verdict.timing_method == "checker_roundtrip_wall_clock_x5" and verdict.timed_draws == 10
    post = [c for c in verdict.checks if c.name == "post_timing"]
    assert post and post[-1].passed and "last timed draw" in post[-1].detail
