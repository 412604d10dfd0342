"""The decoration rule (checker/work_share.py): the median of a judgement's profiled calls' shares decides, and
the kernel process's records are read as numbers, never trusted for their own share; and each profiled call's
unprofiled twin (checker/profiled_twins.py)."""
import pytest

from mkb_ray.checker.profiled_twins import TWIN_FLOOR_US, TWIN_YARDSTICK, ProfiledTwins
from mkb_ray.checker.work_share import FOREIGN_YARDSTICK, MIN_DSL_SHARE, PooledWork


def _record(dsl_us, torch_us, **extra):
    return {"source": "aten_ops", "dsl_us": dsl_us, "torch_compute_us": torch_us, "torch_glue_us": 5.0, **extra}


def test_one_slow_eager_operator_does_not_decide_alone():
    # The CI case: an honest call is DSL 160 µs, aten::add 12 µs; in one audit aten::add stalled at 441 µs.
    work = PooledWork()
    assert work.add(_record(256.0, 441.0, compute_ops={"aten::add": 1})) < MIN_DSL_SHARE
    assert not work.passes
    work.add(_record(160.0, 12.0, compute_ops={"aten::add": 1}))
    work.add(_record(150.0, 12.0, compute_ops={"aten::add": 1}))
    assert work.passes and work.calls == 3
    evidence = work.as_evidence()
    assert evidence["profiled_calls"] == 3 and evidence["compute_ops"] == {"aten::add": 3}
    assert abs(evidence["dsl_share"] - 150.0 / 162.0) < 1e-12  # the median call
    assert abs(evidence["summed_share"] - 566.0 / (566.0 + 465.0)) < 1e-12  # the stall still weighs here
    assert abs(evidence["lowest_call_share"] - 256.0 / 697.0) < 1e-12
    assert "the median of 3 profiled call(s) [37%, 93%, 93%]" in work.describe(on_gpu=False)


def test_eager_work_in_most_calls_fails_even_when_some_are_dsl():
    work = PooledWork()
    for dsl_us, torch_us in ((900.0, 100.0), (100.0, 300.0), (100.0, 300.0)):
        work.add(_record(dsl_us, torch_us))
    assert not work.passes and abs(work.share - 0.25) < 1e-12


def test_eager_work_in_every_call_fails_the_pool():
    work = PooledWork()
    for _ in range(5):
        work.add(_record(100.0, 300.0, compute_ops={"aten::mm": 1}))
    assert not work.passes and abs(work.share - 0.25) < 1e-12
    assert "aten::mm×5" in work.describe(on_gpu=True) and "PyTorch compute" in work.describe(on_gpu=True)


def test_a_record_cannot_claim_its_own_share_or_subtract_time():
    work = PooledWork()
    work.add(_record(10.0, 90.0, dsl_share=1.0))  # the record's own share is ignored
    assert abs(work.share - 0.1) < 1e-12
    work.add(_record(10.0, 90.0, torch_compute_us=-1e9))  # a negative PyTorch time counts as none, not less
    work.add(_record(float("nan"), float("inf")))
    work.add(_record("lots", None))
    assert work.call_shares == [0.1, 1.0, 0.0, 0.0] and abs(work.share - 0.05) < 1e-12 and not work.passes
    assert abs(work.summed_share - 20.0 / 110.0) < 1e-12


def test_malformed_operator_counts_are_dropped():
    work = PooledWork()
    work.add(_record(1.0, 1.0, compute_ops={"aten::add": True, "aten::mul": -3, "aten::sub": "2", "x" * 200: 1}))
    work.add(_record(1.0, 1.0, compute_ops=["aten::add"]))
    assert work.compute_ops == {"x" * 60: 1}


def test_no_record_is_no_share():
    work = PooledWork()
    assert work.share == 0.0 and not work.passes and work.as_evidence()["lowest_call_share"] == 0.0


def test_the_time_outside_the_dsl_is_read_from_unprofiled_calls_and_set_beside_the_references_call():
    """Evidence, not a rule (see WallSplits): the profiler's own cost would inflate a profiled call's time outside
    the DSL, so only unprofiled calls count; the ratio needs the reference's call, timed by the checker."""
    from mkb_ray.checker.work_share import WallSplits

    splits = WallSplits()
    for other in (30.0, 50.0, 40.0):
        splits.add({"wall": {"dsl_us": 100.0, "torch_compute_us": other}})
    splits.add({"wall": {"dsl_us": 100.0, "torch_compute_us": 900.0}}, profiled=True)
    splits.add({"wall": {"dsl_us": 100.0, "torch_compute_us": "forged"}})  # read as 0, never trusted as text
    assert splits.median_outside_us == 35.0
    assert splits.as_evidence()["outside_dsl_over_reference"] is None  # no reference timed yet
    splits.reference_wall_us = 70.0
    evidence = splits.as_evidence()
    assert evidence["outside_dsl_us_unprofiled"] == 35.0 and evidence["outside_dsl_over_reference"] == 0.5
    assert evidence["calls"] == 5  # the share evidence keeps every executed call


def test_time_in_kernels_no_dsl_compile_produced_is_not_the_dsls():
    """A CuTe kernel that only casts (5 µs) beside CUDA compiled by NVRTC doing the work (95 µs): the device record
    calls the NVRTC kernel neither aten's nor ATen-named, so it is in dsl_us, and unnamed_us says no compile made
    it. It counts against the DSL; a call whose kernels all came from the DSL's compiles is unaffected."""
    work = PooledWork()
    assert work.add(_record(100.0, 0.0, unnamed_us=95.0, unnamed_kernels={"rmsnorm_nvrtc": 1})) < 0.1
    assert not work.passes and abs(work.share - 0.05) < 1e-12 and abs(work.summed_share - 0.05) < 1e-12
    assert "kernels no DSL compile produced 95 µs: rmsnorm_nvrtc×1" in work.describe(on_gpu=True)
    honest = PooledWork()
    honest.add(_record(100.0, 10.0, unnamed_us=0.0))
    assert honest.passes and abs(honest.share - 100.0 / 110.0) < 1e-12
    # A record claiming more foreign time than DSL time cannot push the share below zero or the compute past it.
    odd = PooledWork()
    assert odd.add(_record(10.0, 0.0, unnamed_us=50.0)) == 0.0


def test_foreign_kernels_doing_the_references_work_fail_whatever_the_dsl_share():
    """The H200's record of tests/adversarial/cute_v3_foreign_kernel_jiterator.py (2026-12-05), per profiled call:
    the CuTe cast 186 µs, the jiterator kernel 164 µs (in dsl_us, and in unnamed_us), eager silu_and_mul 319 µs on
    the checker's own clock. The share rule passes it (53 %, a slow cast buys share); the yardstick does not: 164 µs
    is 51 % of the reference's device time. An honest record (no foreign kernel) passes at any reference time."""
    work = PooledWork()
    for _ in range(3):
        work.add({"source": "cupti_kernels", "dsl_us": 350.0, "torch_compute_us": 0.0, "torch_glue_us": 399.0,
                  "unnamed_us": 164.0, "unnamed_kernels": {"silu_mul_vectorized8_kernel": 1}})
    assert work.passes and abs(work.share - 186.0 / 350.0) < 1e-12
    passed, detail = work.foreign_check(eager_device_ms=0.319)
    assert not passed
    assert "164 µs" in detail and "51%" in detail and "silu_mul_vectorized8_kernel×3" in detail
    # A faster eager reference does not save it: 164 µs is also 47 % of the call's own device compute.
    passed, detail = work.foreign_check(eager_device_ms=0.5)
    assert not passed and "up to 47% of a call's own device compute" in detail
    # A small foreign helper (10 µs beside 340 µs of CuTe, under both bars) passes, and the detail says how much ran.
    helper = PooledWork()
    helper.add({"source": "cupti_kernels", "dsl_us": 350.0, "torch_compute_us": 0.0, "unnamed_us": 10.0,
                "unnamed_kernels": {"helper": 1}})
    passed, detail = helper.foreign_check(eager_device_ms=0.319)
    assert passed and "10 µs" in detail and "up to 3%" in detail
    honest = PooledWork()
    honest.add({"source": "cupti_kernels", "dsl_us": 60.0, "torch_compute_us": 0.0, "unnamed_us": 0.0})
    assert honest.foreign_check(eager_device_ms=0.001)[0]
    assert honest.median_foreign_us == 0.0


def _cpu(dsl_cpu_us: float, dsl_us: float | None = None) -> dict:
    """A kernel process's `wall` record: the DSL launches' CPU time (what the rule reads) and their wall time."""
    return {"wall": {"dsl_cpu_us": dsl_cpu_us, "dsl_us": dsl_cpu_us if dsl_us is None else dsl_us,
                     "torch_compute_us": 5.0}}


def test_a_dsl_that_works_only_when_profiled_fails_its_twins_and_one_odd_pair_decides_nothing():
    """CPU µs as measured on this CPU (benchmarks/results/2026-12-05-cpu-profiled-twins-cpu-time.txt): the hack that
    runs the DSL kernel only while profiled read 8/227, 8/183, 9/182; mlp_norm/01's honest solution ~0.93."""
    hack = ProfiledTwins()
    for twin, profiled in ((8.0, 227.0), (8.0, 183.0), (9.0, 182.0)):
        hack.add(_cpu(twin), _cpu(profiled))
    passed, detail = hack.check()
    assert not passed and "4%" in detail and "8/227 µs" in detail

    # The median decides: one twin reading high (the best pair 0.53, as one stalled wall-time twin read) does not
    # pass the hack; the wall time beside it, however stalled, is not read at all.
    one_high = ProfiledTwins()
    for twin, profiled in ((8.0, 227.0), (103.0, 194.0), (9.0, 182.0)):
        one_high.add(_cpu(twin, dsl_us=twin * 30), _cpu(profiled))
    assert not one_high.check()[0] and one_high.as_evidence()["best_ratio"] > TWIN_YARDSTICK

    honest = ProfiledTwins()
    honest.add(_cpu(160.7), _cpu(189.7))
    honest.add(_cpu(160.0), _cpu(3643.0))   # a profiled call can still read high in CPU time: one pair says little
    honest.add(_cpu(166.5), _cpu(167.8))
    assert honest.check()[0] and honest.as_evidence()["median_ratio"] == pytest.approx(160.7 / 189.7)

    # mlp_norm/13's honest solution in a full test run read these wall-time pairs (two profiled calls stalled); the
    # rule never sees wall time, so they decide nothing.
    stalled_wall = ProfiledTwins()
    walls = ((484.0, 3063.0), (472.0, 4012.0), (526.0, 463.0))
    for (twin_wall, profiled_wall), cpu in zip(walls, (541.0, 496.0, 493.0)):
        stalled_wall.add(_cpu(cpu, dsl_us=twin_wall), _cpu(cpu * 1.05, dsl_us=profiled_wall))
    assert stalled_wall.check()[0]

    tiny = ProfiledTwins()
    tiny.add(_cpu(0.5), _cpu(TWIN_FLOOR_US - 1))   # under the floor: says nothing
    tiny.add({"wall": "forged"}, _cpu(100.0))       # a record that is not one: no pair
    assert tiny.check() is None and len(tiny.pairs) == 1
    wall_only = ProfiledTwins()  # a twin's record with wall time but no CPU time reads 0: it fails, never passes
    wall_only.add({"wall": {"dsl_us": 190.0}}, _cpu(200.0))
    assert wall_only.check()[0] is False
    assert ProfiledTwins().check() is None
    assert TWIN_YARDSTICK == 0.25


def test_a_fast_foreign_kernel_beside_a_cast_fails_whatever_the_cast_takes():
    """tests/adversarial/cute_v3_foreign_kernel_nvrtc.py on an H100 (2026-12-06): an NVRTC rmsnorm does all of the
    reference's work, a CuTe kernel casts its results; the passing verdicts read 198.5 µs for both against eager's
    472 µs (the split between them was not recorded: 95 + 100 µs is a split that passes). With the cast a little
    slower than the NVRTC kernel the share rule passes (2 of 10 judgements did) and so does the eager yardstick;
    the bar on the call's own compute does not, nor when the cast spins to buy share (a 1,500 µs cast: 94 % DSL,
    the NVRTC kernel 6 % of the call)."""
    for cast_us in (100.0, 1500.0):
        work = PooledWork()
        for _ in range(2):
            work.add({"source": "cupti_kernels", "dsl_us": cast_us + 95.0, "torch_compute_us": 0.0,
                      "unnamed_us": 95.0, "unnamed_kernels": {"rmsnorm_nvrtc": 1}})
        assert work.passes, "the share rule alone passes it"
        assert 95.0 / 472.0 < FOREIGN_YARDSTICK, "and so does the eager yardstick"
        passed, detail = work.foreign_check(eager_device_ms=0.472)
        assert not passed, detail
        assert "rmsnorm_nvrtc×2" in detail and "20% of the eager reference's own 472 µs" in detail
        # Without the eager reference's time the call's own bar still decides.
        assert not work.foreign_check(eager_device_ms=None)[0]
    # One profiled call with the foreign kernel is enough, however many honest calls surround it.
    mixed = PooledWork()
    for unnamed in (0.0, 0.0, 95.0):
        mixed.add({"source": "cupti_kernels", "dsl_us": 1500.0 + unnamed, "torch_compute_us": 0.0,
                   "unnamed_us": unnamed})
    assert mixed.median_foreign_us == 0.0 and abs(mixed.highest_foreign_share - 95.0 / 1595.0) < 1e-12
    assert not mixed.foreign_check(eager_device_ms=0.472)[0]
    honest = PooledWork()
    honest.add({"source": "cupti_kernels", "dsl_us": 80.0, "torch_compute_us": 5.0, "unnamed_us": 0.0})
    assert honest.highest_foreign_share == 0.0 and honest.foreign_check(eager_device_ms=0.472)[0]


def test_unlinked_aten_kernels_reach_the_verdict_as_evidence_and_decide_nothing():
    work = PooledWork()
    record = {"source": "cupti_kernels", "dsl_us": 90.0, "torch_compute_us": 0.0, "torch_glue_us": 99.0,
              "unlinked_aten_us": 95.0, "unlinked_aten_kernels": {"void at::native::copy_rmsnorm_kernel": 1}}
    assert work.add(record) == 1.0 and work.passes and work.foreign_check(eager_device_ms=0.472)[0]
    evidence = work.as_evidence()
    assert evidence["unlinked_aten_us"] == 95.0
    assert evidence["unlinked_aten_kernels"] == {"void at::native::copy_rmsnorm_kernel": 1}
