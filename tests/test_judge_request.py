"""One judging-options type: the request the parent sends, the worker's reading of it, and the command line's
defaults all come from `JudgeOptions`."""
from __future__ import annotations

import argparse
import dataclasses

import pytest

from mkb_ray.cli._common import UsageError, add_judging_options, judging_from_args
from mkb_ray.judge import JudgeLimits, JudgeOptions, JudgeRequest


def test_request_round_trips_and_refuses_fields_it_does_not_know():
    request = JudgeRequest(problem_id="p/01_x", problem_path="/p.py", kernel_path="/k.py", dsl="tirx",
                           seed=7, options=JudgeOptions(warmup=1, timed=3, compile_baseline=False))
    assert JudgeRequest.from_json_dict(request.as_json_dict()) == request
    with pytest.raises(ValueError, match="warmpu"):
        JudgeRequest.from_json_dict({**request.as_json_dict(), "options": {"warmpu": 1}})
    with pytest.raises(ValueError, match="timed_draws"):
        JudgeRequest.from_json_dict({**request.as_json_dict(), "timed_draws": 5})


def test_compile_baseline_is_decided_per_device():
    assert JudgeOptions().resolved("cuda").compile_baseline is True
    assert JudgeOptions().resolved("cpu").compile_baseline is False
    assert JudgeOptions(compile_baseline=True).resolved("cpu").compile_baseline is True
    with pytest.raises(ValueError, match="timed"):
        JudgeOptions(timed=0)


def test_the_command_line_takes_its_defaults_from_the_options_type():
    parser = argparse.ArgumentParser()
    add_judging_options(parser)
    limits, options = judging_from_args(parser.parse_args([]))
    assert options == JudgeOptions() and limits == JudgeLimits()
    limits, options = judging_from_args(parser.parse_args(["--timed", "7", "--no-compile-baseline",
                                                           "--timeout-s", "30"]))
    assert options == dataclasses.replace(JudgeOptions(), timed=7, compile_baseline=False)
    assert limits.timeout_s == 30
    with pytest.raises(UsageError, match="timed"):
        judging_from_args(parser.parse_args(["--timed", "0"]))


def test_a_kernel_time_within_the_harness_noise_claims_no_speedup():
    from mkb_ray.checker.timing import timing_resolved

    # Measured under load: the no-op round trip 21.7 ms, the kernel's 21.7 ms too (net at the 1 µs floor, which
    # read as "67441x eager"): not resolved. An idle CPU: 0.136 ms harness, 0.369 ms round trip: resolved.
    assert not timing_resolved(21.701, 21.7)
    assert timing_resolved(0.369, 0.136)
    assert timing_resolved(0.12, 0.1) and not timing_resolved(0.105, 0.1)  # the line: a tenth of the harness
