"""Least-load placement of judgements on a campaign's evaluators, behind one first-come-first-served queue.

Each submission takes a slot on the evaluator with the most free room (fewest judgements in flight relative to
its slots); when every slot is taken it waits here, in arrival order, for the first slot that frees anywhere.
Why a queue here and not "send it to the least-loaded evaluator now": an evaluator's own queue waits behind
whatever it is judging, however long that takes, while another may free up first; waiting here, a wave of
submissions (many chain hops at once) cannot pile up behind one slow judgement past their attempts' budgets.
Ties go to the evaluator that the source's hash prefers, so re-judging a kernel tends to find that evaluator's
compile cache; load always wins over that preference.

Ray-free and single-threaded (one asyncio loop): `actors/evaluator_router.py` drives it for the whole cluster.
"""
from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional, Sequence


class NoEvaluatorLeft(RuntimeError):
    """Every evaluator of the pool died for good (Ray's restarts spent): nothing can judge a submission."""


@dataclass(frozen=True)
class EvaluatorLoad:
    """One evaluator's share of the pool's load."""

    index: int      # its position in the pool's evaluator list
    slots: int      # judgements it runs at once
    in_flight: int  # judgements routed to it that have not returned yet
    alive: bool     # False once it died for good; it takes no more submissions


@dataclass(frozen=True)
class PoolLoad:
    """The pool's load at one moment, for progress displays and tests."""

    evaluators: tuple[EvaluatorLoad, ...]
    waiting: int  # submissions queued for a free slot

    @property
    def capacity(self) -> int:
        """Judgements the live evaluators run at once."""
        return sum(e.slots for e in self.evaluators if e.alive)

    @property
    def in_flight(self) -> int:
        return sum(e.in_flight for e in self.evaluators)


@dataclass
class _Waiter:
    affinity: int
    granted: asyncio.Future  # resolves to the index of the evaluator whose slot it was given


class EvaluatorSlots:
    """Who holds which evaluator slot, and who waits for one. Use from one asyncio loop only."""

    def __init__(self, slots: Sequence[int]) -> None:
        if not slots:
            raise ValueError("an evaluator pool needs at least one evaluator")
        if any(s < 1 for s in slots):
            raise ValueError(f"every evaluator needs at least one slot, got {list(slots)}")
        self._slots = list(slots)
        self._in_flight = [0] * len(slots)
        self._alive = [True] * len(slots)
        self._waiting: deque[_Waiter] = deque()

    async def acquire(self, affinity: int) -> int:
        """Wait for a slot; returns the evaluator's index. `affinity` (any int, e.g. a hash of the source) breaks
        ties between equally loaded evaluators. Raises NoEvaluatorLeft when none is alive."""
        if not any(self._alive):
            raise NoEvaluatorLeft("every evaluator of the pool died for good")
        waiter = _Waiter(affinity, asyncio.get_running_loop().create_future())
        # Always through the queue, so a newcomer never takes a slot ahead of a submission already waiting.
        self._waiting.append(waiter)
        self._dispatch()
        try:
            return await waiter.granted
        except asyncio.CancelledError:
            granted = waiter.granted
            if granted.done() and not granted.cancelled() and granted.exception() is None:
                self.release(granted.result())  # granted just as the caller gave up: hand it on
            elif waiter in self._waiting:
                self._waiting.remove(waiter)
            raise

    def release(self, index: int) -> None:
        """The judgement on evaluator `index` returned (or failed): its slot goes to the next waiter."""
        if self._in_flight[index] <= 0:
            raise ValueError(f"evaluator {index} has no judgement in flight to release")
        self._in_flight[index] -= 1
        self._dispatch()

    def retire(self, index: int) -> None:
        """Evaluator `index` died for good: route nothing more to it (its in-flight judgements still release)."""
        self._alive[index] = False
        self._dispatch()

    def is_alive(self, index: int) -> bool:
        return self._alive[index]

    def load(self) -> PoolLoad:
        evaluators = tuple(EvaluatorLoad(i, s, n, a) for i, (s, n, a)
                           in enumerate(zip(self._slots, self._in_flight, self._alive)))
        return PoolLoad(evaluators, sum(1 for w in self._waiting if not w.granted.done()))

    def _pick(self, affinity: int) -> Optional[int]:
        """The live evaluator with a free slot and the least relative load; ties: the one `affinity` prefers,
        then the ones after it in turn."""
        count = len(self._slots)
        free = [i for i in range(count) if self._alive[i] and self._in_flight[i] < self._slots[i]]
        if not free:
            return None
        return min(free, key=lambda i: (Fraction(self._in_flight[i], self._slots[i]), (i - affinity) % count))

    def _dispatch(self) -> None:
        if not any(self._alive):
            while self._waiting:
                waiter = self._waiting.popleft()
                if not waiter.granted.done():
                    waiter.granted.set_exception(NoEvaluatorLeft("every evaluator of the pool died for good"))
            return
        while self._waiting:
            waiter = self._waiting[0]
            if waiter.granted.done():  # its caller was cancelled
                self._waiting.popleft()
                continue
            index = self._pick(waiter.affinity)
            if index is None:
                return
            self._waiting.popleft()
            self._in_flight[index] += 1
            waiter.granted.set_result(index)
