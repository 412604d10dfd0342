"""The device lock that lets several judgements share one GPU while each times alone (judge_worker/device_lock.py),
exercised across real processes: readers overlap, a timer is alone, and a waiting timer is not starved."""
from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

from mkb_ray.judge_worker.device_lock import DeviceLock

HOLD_S = 0.6


def _hold(path: str, mode: str, start_after: float, events: "multiprocessing.Queue[tuple[str, str, float]]",
          name: str) -> None:
    time.sleep(start_after)
    lock = DeviceLock(path)
    if mode == "upgrade":  # a judgement: shared, then timing alone inside it, then shared again
        with lock.shared():
            events.put((name, "shared", time.monotonic()))
            time.sleep(HOLD_S)
            with lock.exclusive():
                events.put((name, "alone", time.monotonic()))
                time.sleep(HOLD_S)
                events.put((name, "alone_end", time.monotonic()))
            events.put((name, "shared_again", time.monotonic()))
        return
    if mode == "compile":  # a judgement's first call: shared, then nothing held while it compiles
        with lock.shared():
            with lock.released():
                events.put((name, "compiling", time.monotonic()))
                time.sleep(3 * HOLD_S)
                events.put((name, "compiled", time.monotonic()))
            events.put((name, "shared_again", time.monotonic()))
        return
    hold = lock.shared() if mode == "shared" else lock.exclusive()
    with hold:
        events.put((name, "in", time.monotonic()))
        time.sleep(HOLD_S)
        events.put((name, "out", time.monotonic()))


def _run(path: Path, plan: list[tuple[str, str, float]]) -> dict[tuple[str, str], float]:
    context = multiprocessing.get_context("spawn")
    events = context.Queue()
    workers = [context.Process(target=_hold, args=(str(path), mode, after, events, name)) for name, mode, after in plan]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
        assert worker.exitcode == 0
    seen = {}
    while not events.empty():
        name, what, when = events.get()
        seen[(name, what)] = when
    return seen


def test_readers_share_the_device(tmp_path: Path) -> None:
    seen = _run(tmp_path / "device.lock", [("a", "shared", 0.0), ("b", "shared", 0.2)])
    assert seen[("b", "in")] < seen[("a", "out")], "two readers must hold the device at once"


def test_a_timer_is_alone_and_a_waiting_timer_stops_new_readers(tmp_path: Path) -> None:
    # a reads from t=0; the timer asks at 0.2 (waits for a); reader c asks at 0.4, while the timer waits: c must
    # wait for the timer to finish, though the lock is only held shared when c asks (writer preference).
    seen = _run(tmp_path / "device.lock", [("a", "shared", 0.0), ("timer", "exclusive", 0.2), ("c", "shared", 0.4)])
    assert seen[("timer", "in")] >= seen[("a", "out")]
    assert seen[("c", "in")] >= seen[("timer", "out")]


def test_timing_inside_a_judgement_gives_up_and_resumes_its_shared_hold(tmp_path: Path) -> None:
    seen = _run(tmp_path / "device.lock", [("judge", "upgrade", 0.0), ("other", "shared", 0.2)])
    # the other reader got in before the judgement timed; the timing waited for it to leave
    assert seen[("other", "in")] < seen[("judge", "alone")]
    assert seen[("judge", "alone")] >= seen[("other", "out")]
    assert seen[("judge", "shared_again")] >= seen[("judge", "alone_end")]


def test_a_compile_does_not_keep_a_timer_waiting(tmp_path: Path) -> None:
    seen = _run(tmp_path / "device.lock", [("compiler", "compile", 0.0), ("timer", "exclusive", 0.2)])
    assert seen[("timer", "out")] < seen[("compiler", "compiled")], "the timer must not wait for the compile"
    assert seen[("compiler", "shared_again")] >= seen[("compiler", "compiled")]


def test_no_lock_path_holds_nothing() -> None:
    lock = DeviceLock(None)
    with lock.shared(), lock.exclusive():
        pass
    assert lock.waited_s == 0.0
