"""GPU timing from the device's record (CUDA events made by the harness in the kernel process), held to the
checker's own clock: what the checker accepts from a timed round trip's reply, and what it refuses.

The events themselves need a GPU (tests/test_judge.py's GPU test and benchmarks/timing_fidelity.py on the H200);
what is checked here is the checker's side, which runs anywhere.
"""
from __future__ import annotations

import math

import pytest

from mkb_ray.checker.kernel_process import Rejected
from mkb_ray.checker.timing import CLOCK_SLACK_MS, device_times, time_draws
from mkb_ray.kernel_runner.draw_clock import SETTLE_SLACK_MS, DrawTime


def test_device_times_that_fit_the_checkers_clock_are_taken():
    assert device_times({"device_ms": [0.04, 0.05, 0.041]}, 3, wall_ms=0.6) == [0.04, 0.05, 0.041]
    # Two clocks: a record a hair over the wall time (within the slack) is not called forged.
    assert device_times({"device_ms": [0.3, 0.3]}, 2, wall_ms=0.6 - CLOCK_SLACK_MS / 2) == [0.3, 0.3]


@pytest.mark.parametrize("reply, why", [
    ({"device_ms": [0.5, 0.5]}, "longer than the time it describes"),  # 1.0 ms claimed inside a 0.6 ms trip
    ({"device_ms": [0.04]}, "no valid device time"),  # one draw short
    ({"device_ms": [0.04, float("nan")]}, "no valid device time"),
    ({"device_ms": [0.04, -0.01]}, "no valid device time"),
    ({"device_ms": [0.04, True]}, "no valid device time"),
    ({"device_ms": "0.04,0.04"}, "no valid device time"),
    ({"ok": True}, "no valid device time"),
    ([0.04, 0.04], "no valid device time"),
])
def test_a_record_the_checker_could_not_have_seen_fails_the_protocol(reply, why):
    with pytest.raises(Rejected) as caught:
        device_times(reply, 2, wall_ms=0.6)
    assert caught.value.check == "protocol" and why in caught.value.reason


def test_work_left_running_past_the_return_is_counted_to_the_device_wide_wait():
    honest = DrawTime(span_ms=0.041, settled_ms=0.041 + SETTLE_SLACK_MS / 4, drain_ms=0.004)
    assert not honest.late and honest.counted_ms == pytest.approx(0.041)
    # The host was slow to record `settled` (descheduled after the device-wide wait had returned at once).
    slow_host = DrawTime(span_ms=0.041, settled_ms=0.041 + 3 * SETTLE_SLACK_MS, drain_ms=0.004)
    assert not slow_host.late and slow_host.counted_ms == pytest.approx(0.041)
    # Returned at once, a side stream ran 0.3 ms more: the device-wide wait after `end` waited for it.
    deferred = DrawTime(span_ms=0.005, settled_ms=0.3, drain_ms=0.29)
    assert deferred.late and deferred.counted_ms == pytest.approx(0.3)


class _ScriptedTrips:
    """The checker's round-trip clock, replaced by recorded trips (wall ms each) so time_draws's bookkeeping can be
    checked without a GPU; `on_gpu` makes it expect a device record in every reply."""

    on_gpu, flush_l2 = True, True

    def __init__(self, walls: list[float]) -> None:
        self.walls = list(walls)

    def measure(self, call):
        return call(), self.walls.pop(0)


def test_time_draws_reports_the_device_median_and_keeps_the_wall_clock_beside_it():
    # 2 warm-up + 4 timed draws, 2 per trip: 3 trips of 0.5 ms wall; the device saw 0.04-0.05 ms per draw.
    replies = iter([{"device_ms": [9.0e-2, 9.0e-2]},  # warm-up: not counted
                    {"device_ms": [0.04, 0.05], "late_draws": 0}, {"device_ms": [0.045, 0.041], "late_draws": 1}])
    series = time_draws(_ScriptedTrips([0.5, 0.5, 0.5]), lambda trip: None, lambda count: next(replies),
                        warmup=2, timed=4, per_trip=2)
    assert series.device is not None
    # Per trip: 0.045 and 0.043 ms per draw; their median.
    assert series.device.median_ms == pytest.approx(0.044) and series.device.samples == 4
    assert series.device.method == "cuda_events_led_l2_flushed_x2"
    assert series.wall.median_ms == pytest.approx(0.25) and series.wall.method == "checker_roundtrip_l2_flushed_x2"
    assert series.late_draws == 1
    # Evidence of what the pipe wait before a trip costs its first call: the median by place in the trip.
    assert series.by_position == [pytest.approx(0.0425), pytest.approx(0.0455)]


def test_computing_a_whole_trip_in_its_first_call_buys_no_speed():
    """Every bank of a trip is written before the trip and visible through the inputs' storage: a kernel can do all
    five draws' work in the first call and return at once from the other four. Per draw the median would read
    ~0 ms; per trip it is the work's true 0.05 ms per draw."""
    honest = iter([{"device_ms": [0.05] * 5}, {"device_ms": [0.05] * 5}])
    ahead = iter([{"device_ms": [0.25, 0.001, 0.001, 0.001, 0.001]}, {"device_ms": [0.25, 0.001, 0.001, 0.001, 0.001]}])
    times = {}
    for name, replies in (("honest", honest), ("ahead", ahead)):
        series = time_draws(_ScriptedTrips([0.6, 0.6]), lambda trip: None, lambda count, r=replies: next(r),
                            warmup=0, timed=10, per_trip=5)
        times[name] = series.device.median_ms
    assert times["ahead"] >= times["honest"] - 1e-9


def test_time_draws_stops_at_a_forged_trip():
    replies = iter([{"device_ms": [0.04]}, {"device_ms": [0.9]}])  # the second trip claims more than its 0.5 ms
    with pytest.raises(Rejected, match="forged"):
        time_draws(_ScriptedTrips([0.5, 0.5]), lambda trip: None, lambda count: next(replies), warmup=0, timed=2)


def test_the_cpu_target_keeps_the_checkers_wall_clock():
    timer = _ScriptedTrips([0.3, 0.2, 0.4])
    timer.on_gpu = False
    series = time_draws(timer, lambda trip: None, lambda count: {"ok": True}, warmup=0, timed=3)
    assert series.device is None  # no device record: the checker's wall clock is all there is
    assert series.wall.median_ms == pytest.approx(0.3) and not math.isnan(series.wall.max_ms)
    assert series.wall.method == "checker_roundtrip_wall_clock"
