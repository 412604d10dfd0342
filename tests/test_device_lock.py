"""The device lock that lets several judgements share one GPU while each times alone (checker/device_lock.py),
exercised across real processes: readers overlap, a timer is alone, and a waiting timer is not starved.

Each step waits for the one before it by an event, never by a sleep (spawned children start fresh interpreters, so
a delay says nothing about where another process has got to on a loaded machine). Where a step must wait until
another process is *blocked* on the lock, the test reads /proc/locks, where Linux lists every process waiting for
a flock. A process that should have waited but did not makes the next step come early, and the timestamps fail."""
from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path
from typing import Any, Callable

from mkb_ray.checker.device_lock import DeviceLock

WAIT_S = 20.0   # longest a process waits for a signal; a correct lock never needs it, a broken one shows in the order


def _hold(path: str, mode: str, events: "multiprocessing.Queue[tuple[str, str, float]]", name: str,
          go: Any = None, entered: Any = None, leave: Any = None, done: Any = None) -> None:
    """Take the lock in `mode` once `go` is set; set `entered` once inside (`mode` compile: once released), stay
    until `leave` is set (or WAIT_S passed), set `done` once the inner step ended."""
    if go is not None:
        go.wait(WAIT_S)

    def note(what: str) -> None:
        events.put((name, what, time.monotonic()))

    def signal(event: Any) -> None:
        if event is not None:
            event.set()

    def stay() -> None:
        if leave is not None:
            leave.wait(WAIT_S)

    lock = DeviceLock(path)
    if mode == "upgrade":  # a judgement: shared, then timing alone inside it, then shared again
        with lock.shared():
            note("shared")
            signal(entered)
            stay()
            with lock.exclusive():
                note("alone")
                signal(done)
                note("alone_end")
            note("shared_again")
        return
    if mode == "compile":  # a judgement's first call: shared, then nothing held while it compiles
        with lock.shared():
            with lock.released():
                note("compiling")
                signal(entered)
                stay()
                note("compiled")
            note("shared_again")
        return
    hold = lock.shared() if mode == "shared" else lock.exclusive()
    with hold:
        note("in")
        signal(entered)
        stay()
        note("out")
    signal(done)


class _Run:
    """Spawned processes holding the lock at `path`, and the parent's view of them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.context = multiprocessing.get_context("spawn")
        self.events = self.context.Queue()
        self.workers: list[Any] = []

    def event(self) -> Any:
        return self.context.Event()

    def start(self, name: str, mode: str, **signals: Any) -> Any:
        worker = self.context.Process(target=_hold, args=(str(self.path), mode, self.events, name), kwargs=signals)
        worker.start()
        self.workers.append(worker)
        return worker

    def waiting(self, worker: Any, suffix: str = "") -> bool:
        """Whether `worker` is blocked waiting for a flock on `<path><suffix>` (a `->` line of /proc/locks)."""
        try:
            stat = os.stat(f"{self.path}{suffix}")
        except FileNotFoundError:
            return False
        file_id = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
        with open("/proc/locks") as locks:
            for line in locks:
                fields = line.split()
                if len(fields) >= 7 and fields[1] == "->" and fields[5] == str(worker.pid) and fields[6] == file_id:
                    return True
        return False

    def seen(self) -> dict[tuple[str, str], float]:
        for worker in self.workers:
            worker.join(60)
            assert worker.exitcode == 0
        seen = {}
        while not self.events.empty():
            name, what, when = self.events.get()
            seen[(name, what)] = when
        return seen


def _until(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def test_readers_share_the_device(tmp_path: Path) -> None:
    # a stays until b is in: if readers could not share, b would wait for a, a would give up waiting after WAIT_S,
    # and b's "in" would come after a's "out".
    run = _Run(tmp_path / "device.lock")
    a_in, b_in = run.event(), run.event()
    run.start("a", "shared", entered=a_in, leave=b_in)
    run.start("b", "shared", go=a_in, entered=b_in)
    seen = run.seen()
    assert seen[("b", "in")] < seen[("a", "out")], "two readers must hold the device at once"


def test_a_timer_is_alone_and_a_waiting_timer_stops_new_readers(tmp_path: Path) -> None:
    # a reads; the timer asks once a is in and waits for it; reader c asks only once the timer is seen waiting, and
    # a leaves only once c is seen waiting too (or is in: a lock without writer preference lets it in at once,
    # and then c's "in" comes before the timer's "out"). So c asked while the lock was held only shared.
    run = _Run(tmp_path / "device.lock")
    a_in, a_leave, c_go = run.event(), run.event(), run.event()
    c_in = run.event()
    run.start("a", "shared", entered=a_in, leave=a_leave)
    timer = run.start("timer", "exclusive", go=a_in)
    c = run.start("c", "shared", go=c_go, entered=c_in)
    _until(a_in.is_set, "a is in")
    # Waiting for the lock, the timer holds the turnstile (device_lock.py), which is what keeps new readers out.
    _until(lambda: run.waiting(timer), "the timer waits for the lock")
    c_go.set()
    _until(lambda: c_in.is_set() or run.waiting(c, ".turnstile"), "c waits at the turnstile or is in")
    a_leave.set()
    seen = run.seen()
    assert seen[("timer", "in")] >= seen[("a", "out")]
    assert seen[("c", "in")] >= seen[("timer", "out")]


def test_timing_inside_a_judgement_gives_up_and_resumes_its_shared_hold(tmp_path: Path) -> None:
    # the other reader comes in while the judgement holds shared; the judgement times once the other is in, and
    # the other leaves only once the judgement is seen waiting for the lock (or is already timing: broken).
    run = _Run(tmp_path / "device.lock")
    judge_shared, other_in, other_leave, judge_alone = run.event(), run.event(), run.event(), run.event()
    judge = run.start("judge", "upgrade", entered=judge_shared, leave=other_in, done=judge_alone)
    run.start("other", "shared", go=judge_shared, entered=other_in, leave=other_leave)
    _until(other_in.is_set, "the other reader is in")
    _until(lambda: judge_alone.is_set() or run.waiting(judge), "the judgement waits to time, or times")
    other_leave.set()
    seen = run.seen()
    # the other reader got in before the judgement timed; the timing waited for it to leave
    assert seen[("other", "in")] < seen[("judge", "alone")]
    assert seen[("judge", "alone")] >= seen[("other", "out")]
    assert seen[("judge", "shared_again")] >= seen[("judge", "alone_end")]


def test_a_compile_does_not_keep_a_timer_waiting(tmp_path: Path) -> None:
    # the compile lasts until the timer is done: a compile that kept its hold would keep the timer out until the
    # compile gave up waiting (WAIT_S), and the timer's "out" would come after "compiled".
    run = _Run(tmp_path / "device.lock")
    compiling, timer_done = run.event(), run.event()
    run.start("compiler", "compile", entered=compiling, leave=timer_done)
    run.start("timer", "exclusive", go=compiling, done=timer_done)
    seen = run.seen()
    assert seen[("timer", "out")] < seen[("compiler", "compiled")], "the timer must not wait for the compile"
    assert seen[("compiler", "shared_again")] >= seen[("compiler", "compiled")]


def test_no_lock_path_holds_nothing() -> None:
    lock = DeviceLock(None)
    with lock.shared(), lock.exclusive():
        pass
    assert lock.waited_s == 0.0
