"""The attempt's budget: an attempt clock that can pause for evaluator queueing, counted submissions, kernel size
and tokens. Pure bookkeeping — agents ask it before they act and tell it what they spent."""
from __future__ import annotations

import time
from typing import Callable, Optional

from ..records import BudgetSpec, LLMUsage


class Budget:
    """Tracks one attempt against its `BudgetSpec`.

    The attempt clock is wall time since `start()`, minus the time submissions spent waiting in the evaluator queue
    (unless `count_queue_wait`): an attempt is not charged for a busy evaluator it cannot influence. Judging time
    itself is charged, as in MetaKernelBench.
    """

    def __init__(self, spec: BudgetSpec, clock: Callable[[], float] = time.monotonic) -> None:
        self.spec = spec
        self._clock = clock
        self._started: Optional[float] = None
        self.queue_wait_s = 0.0
        self.counted_submissions = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.turns = 0
        self.turn_durations_s: list[float] = []  # attempt-clock seconds of each finished turn (call + judging)
        self._turn_started: Optional[float] = None

    def start(self) -> None:
        if self._started is None:
            self._started = self._clock()

    def wall_s(self) -> float:
        """Plain wall time since start."""
        return 0.0 if self._started is None else self._clock() - self._started

    def elapsed_s(self) -> float:
        """The attempt clock: what the wall-clock budget is charged."""
        paused = 0.0 if self.spec.count_queue_wait else self.queue_wait_s
        return max(0.0, self.wall_s() - paused)

    def remaining_s(self) -> float:
        return self.spec.wall_clock_s - self.elapsed_s()

    # -- tokens and turns -------------------------------------------------------------------------------------
    @property
    def tokens_used(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def charge(self, usage: LLMUsage) -> None:
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens

    def tokens_left(self) -> Optional[int]:
        return None if self.spec.tokens is None else self.spec.tokens - self.tokens_used

    def start_turn(self) -> int:
        self.turns += 1
        self._turn_started = self.elapsed_s()
        return self.turns

    def end_turn(self) -> None:
        """The turn started last is over (its reply handled, its kernel judged): remember how long it took."""
        if self._turn_started is not None:
            self.turn_durations_s.append(self.elapsed_s() - self._turn_started)
            self._turn_started = None

    def expected_turn_s(self) -> float:
        """What the next turn is expected to cost: the slowest turn of this attempt so far (0 before the first).
        The slowest, not the mean: prompts grow from turn to turn, and one turn too many costs the closing one."""
        return max(self.turn_durations_s, default=0.0)

    def stop_reason(self, reserve_s: float = 0.0) -> Optional[str]:
        """Why no further turn may start (None: go on). `reserve_s` keeps wall time back for a closing turn: a
        turn starts only if, after the time it is expected to take, at least `reserve_s` would be left."""
        if self.remaining_s() - self.expected_turn_s() <= reserve_s:
            return "wall_clock"
        left = self.tokens_left()
        if left is not None and left <= 0:
            return "tokens"
        if self.spec.max_turns is not None and self.turns >= self.spec.max_turns:
            return "max_turns"
        return None

    # -- submissions -------------------------------------------------------------------------------------------
    @property
    def submissions_left(self) -> int:
        return max(0, self.spec.submissions - self.counted_submissions)

    def kernel_refusal(self, source: object) -> Optional[str]:
        """Why this kernel cannot be judged (None: it can). Such a submission never reaches the evaluator and
        does not count."""
        if isinstance(source, bytes):
            try:
                source = source.decode("utf-8")
            except UnicodeDecodeError as err:
                return f"the kernel is not valid UTF-8 (byte {err.start}); nothing was judged"
        if not isinstance(source, str):
            return "the kernel is not text; nothing was judged"
        if not source.strip():
            return "the kernel is empty; nothing was judged"
        try:
            size = len(source.encode("utf-8"))
        except UnicodeEncodeError as err:
            return f"the kernel is not valid UTF-8 (character {err.start} cannot be encoded); nothing was judged"
        if size > self.spec.kernel_bytes:
            return (f"the kernel is {size:,} bytes, over the {self.spec.kernel_bytes:,}-byte limit; "
                    "nothing was judged")
        return None

    def submission_refusal(self) -> Optional[str]:
        if self.counted_submissions >= self.spec.submissions:
            return (f"the submission budget is spent ({self.counted_submissions} of {self.spec.submissions} "
                    "judged submissions used); this kernel was not judged")
        return None

    def record_judged(self, round_trip_s: float, eval_s: float) -> float:
        """Count one judged submission; returns its queue wait (round trip minus the judge's own wall time)."""
        self.counted_submissions += 1
        queue_wait_s = max(0.0, round_trip_s - eval_s)
        self.queue_wait_s += queue_wait_s
        return queue_wait_s
