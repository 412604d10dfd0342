"""Submissions are routed to evaluators by load, across every copy of the pool (issue 12, item 4).

The slot table (`EvaluatorSlots`) is tested on its own, without Ray; the router (`EvaluatorRouter`) and the pool are
the real ones on a local Ray, in front of stand-in evaluators that hold a call until the test releases it, or raise,
on command, and answer with their name: judging real kernels would make these tests slow and say nothing more about
routing. A held call ends only when the test says so, so a test checks the state while calls are in flight without
racing a timer."""
from __future__ import annotations

import asyncio
import time
import zlib
from typing import Any, Callable

import pytest

from mkb_ray.actors.evaluator_slots import EvaluatorSlots, NoEvaluatorLeft, PoolLoad
from mkb_ray.campaign.services import EvaluatorPool, evaluator_gpu_share, evaluator_slot_counts, route_evaluators

PROBLEM = "mlp_norm/01_fused_add_rmsnorm"


# -- the slot table, no Ray --------------------------------------------------------------------------------------

def test_least_relative_load_wins_over_the_hash_preference():
    async def scenario() -> list[int]:
        slots = EvaluatorSlots([2, 1])
        got = [await slots.acquire(affinity=0) for _ in range(3)]
        # idle both: the preferred one (0); then 0 is half full, 1 empty: 1; then only 0 has room.
        fourth = asyncio.ensure_future(slots.acquire(affinity=0))
        await asyncio.sleep(0)
        assert not fourth.done() and slots.load().waiting == 1
        slots.release(1)
        got.append(await fourth)
        return got

    assert asyncio.run(scenario()) == [0, 1, 0, 1]


def test_waiters_get_slots_in_arrival_order_and_a_cancelled_one_is_skipped():
    async def scenario() -> list[int]:
        slots = EvaluatorSlots([1])
        await slots.acquire(affinity=0)
        order: list[int] = []

        async def wait(n: int) -> None:
            await slots.acquire(affinity=n)
            order.append(n)

        waiters = [asyncio.ensure_future(wait(n)) for n in range(4)]
        await asyncio.sleep(0)
        waiters[1].cancel()
        await asyncio.sleep(0)
        assert slots.load().waiting == 3
        for _ in range(3):
            slots.release(0)
            await asyncio.sleep(0)
        await asyncio.gather(waiters[0], waiters[2], waiters[3])
        assert slots.load().in_flight == 1 and slots.load().waiting == 0
        return order

    assert asyncio.run(scenario()) == [0, 2, 3]


def test_when_the_last_evaluator_is_retired_waiters_fail():
    async def scenario() -> None:
        slots = EvaluatorSlots([1, 1])
        await slots.acquire(0)
        await slots.acquire(0)
        waiter = asyncio.ensure_future(slots.acquire(0))
        await asyncio.sleep(0)
        slots.retire(0)
        await asyncio.sleep(0)
        assert not waiter.done()
        slots.release(0)  # a retired evaluator's judgement still returns its slot, to nobody
        await asyncio.sleep(0)
        assert not waiter.done()
        slots.retire(1)
        with pytest.raises(NoEvaluatorLeft):
            await waiter
        with pytest.raises(NoEvaluatorLeft):
            await slots.acquire(0)

    asyncio.run(scenario())


def test_capacity_sums_the_evaluators_slots():
    pool = EvaluatorPool(router=None, handles=["a", "b", "c"], slots=[1, 3, 2])
    assert pool.capacity == 6
    assert evaluator_slot_counts("cuda", slots=8, gpus=4) == [1, 1, 1, 1]  # one slot per GPU evaluator
    assert evaluator_slot_counts("cpu", slots=3, gpus=0) == [3]
    with pytest.raises(RuntimeError, match="no GPU"):
        evaluator_slot_counts("cuda", slots=1, gpus=0)
    # A model replica sharing the GPU (scheduler.model_gpu_fraction) leaves each GPU evaluator the rest.
    assert (evaluator_gpu_share(1.0), evaluator_gpu_share(0.5), evaluator_gpu_share(0.3)) == (1.0, 0.5, 0.7)


# -- the router on a local Ray ------------------------------------------------------------------------------------

def _stand_in_evaluator_class() -> type:
    """An EvaluatorActor stand-in: `hold KEY ...` returns once `release(KEY)` was called on this instance (before or
    after), `raise` raises, anything else returns at once; the answer names the instance. Defined in a function:
    Ray workers cannot import this test module."""

    class StandInEvaluator:
        def __init__(self, name: str) -> None:
            self.name = name
            self.releases: dict[str, Any] = {}   # key -> asyncio.Event, set by release(key)

        def _release_of(self, key: str) -> Any:
            import asyncio

            return self.releases.setdefault(key, asyncio.Event())

        async def evaluate(self, problem_id: str, kernel_source: str, dsl: str, preset: Any = None,
                           seed: Any = None) -> dict[str, Any]:
            if kernel_source.startswith("raise"):
                raise ValueError(f"stand-in failure on {self.name}")
            if kernel_source.startswith("hold"):
                await self._release_of(kernel_source.split()[1]).wait()
            return {"evaluator": self.name, "kernel": kernel_source}

        async def release(self, key: str) -> None:
            self._release_of(key).set()

    return StandInEvaluator


@pytest.fixture(scope="module")
def stand_ins(local_ray) -> list[Any]:
    """Four stand-in evaluators e0..e3, started once (a worker process each is what makes these tests slow)."""
    # No CPU reserved: the local Ray has two, and a stand-in needs none. No restarts: a kill is for good.
    remote_class = local_ray.remote(num_cpus=0, max_restarts=0)(_stand_in_evaluator_class())
    handles = [remote_class.remote(f"e{i}") for i in range(4)]
    local_ray.get([h.__ray_ready__.remote() for h in handles])
    return handles


@pytest.fixture(scope="module")
def pool(stand_ins) -> EvaluatorPool:
    """The real router over e0 (one slot) and e1 (three), shared by the tests that leave both alive."""
    return route_evaluators(stand_ins[:2], [1, 3])


def _source_preferring(index: int, count: int, stem: str) -> str:
    """A kernel source whose hash makes evaluator `index` the tie-break choice among `count` equally loaded ones."""
    n = 0
    while zlib.crc32(f"{stem} #{n}".encode()) % count != index:
        n += 1
    return f"{stem} #{n}"


async def _until(pool: EvaluatorPool, condition: Callable[[PoolLoad], bool], timeout_s: float = 30.0) -> PoolLoad:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        load = await pool.router.load.remote()
        if condition(load):
            return load
        await asyncio.sleep(0.02)
    raise AssertionError(f"the router's load never met the condition: {load}")


async def _release(handles: list[Any], key: str) -> None:
    """Let the calls holding on `key` return, on each of these stand-ins (a later `hold key` returns at once)."""
    await asyncio.gather(*[handle.release.remote(key) for handle in handles])


def test_submissions_go_to_the_idle_evaluator_while_the_other_is_busy(pool):
    async def scenario() -> tuple[dict, list[dict]]:
        busy = asyncio.ensure_future(pool.evaluate(PROBLEM, _source_preferring(0, 2, "hold busy"), "tirx"))
        await _until(pool, lambda load: load.evaluators[0].in_flight == 1)
        # Each of these prefers e0 by its hash (the tie-break among idle evaluators); load wins: they go to e1.
        quick = await asyncio.gather(*[pool.evaluate(PROBLEM, _source_preferring(0, 2, f"quick {i}"), "tirx")
                                       for i in range(3)])
        assert not busy.done(), "the long call finished before the quick ones: the test proves nothing"
        await _release(pool.handles, "busy")
        return await busy, quick

    busy, quick = asyncio.run(scenario())
    assert busy["evaluator"] == "e0"
    assert [v["evaluator"] for v in quick] == ["e1"] * 3
    assert pool.load().in_flight == 0


def test_in_flight_counts_return_to_zero_after_calls_finish_and_after_one_raises(pool):
    async def scenario() -> None:
        calls = [asyncio.ensure_future(pool.evaluate(PROBLEM, f"hold counts #{i}", "tirx")) for i in range(6)]
        # Past capacity (4), submissions wait in the router, not on an evaluator.
        load = await _until(pool, lambda load: load.in_flight + load.waiting == 6)
        assert [e.in_flight for e in load.evaluators] == [1, 3] and load.waiting == 2
        await _release(pool.handles, "counts")
        await asyncio.gather(*calls)
        with pytest.raises(Exception, match="stand-in failure"):
            await pool.evaluate(PROBLEM, "raise", "tirx")

    asyncio.run(scenario())
    load = pool.load()
    assert load.in_flight == 0 and load.waiting == 0
    assert [e.alive for e in load.evaluators] == [True, True]
    # The evaluator that raised still judges.
    assert asyncio.run(pool.evaluate(PROBLEM, "after", "tirx"))["kernel"] == "after"


def test_capacity_is_the_routers_slots_and_a_copy_in_a_ray_task_counts_on_the_same_router(local_ray, pool):
    assert pool.capacity == 4 and pool.load().capacity == 4

    @local_ray.remote(num_cpus=0)
    def trial(pool_copy: EvaluatorPool, source: str) -> dict:
        import asyncio

        return asyncio.run(pool_copy.evaluate(PROBLEM, source, "tirx"))

    ref = trial.remote(pool, "hold in-task")
    deadline = time.monotonic() + 30
    while pool.load().in_flight == 0:
        assert time.monotonic() < deadline, "the task's submission never reached the router"
        time.sleep(0.02)
    local_ray.get([handle.release.remote("in-task") for handle in pool.handles], timeout=30)
    assert local_ray.get(ref, timeout=30)["kernel"] == "hold in-task"
    assert pool.load().in_flight == 0


def test_an_evaluator_dead_for_good_is_retired_and_its_submission_judged_on_another(local_ray, stand_ins):
    pool = route_evaluators(stand_ins[2:], [1, 1])  # e2, e3; its own router, since retiring is for good

    async def scenario() -> dict:
        # Held on e2 until e2 is killed (so it is surely in flight then); released on e3, where it is judged again.
        await _release(pool.handles[1:], "stranded")
        stranded = asyncio.ensure_future(pool.evaluate(PROBLEM, _source_preferring(0, 2, "hold stranded"), "tirx"))
        await _until(pool, lambda load: load.evaluators[0].in_flight == 1)
        local_ray.kill(pool.handles[0], no_restart=True)
        return await asyncio.wait_for(stranded, 30)

    assert asyncio.run(scenario())["evaluator"] == "e3"
    load = pool.load()
    assert [e.alive for e in load.evaluators] == [False, True] and load.capacity == 1 and load.in_flight == 0
    # A dead evaluator answers at once; retired, it no longer draws the submissions its hash would send it.
    again = asyncio.run(pool.evaluate(PROBLEM, _source_preferring(0, 2, "next"), "tirx"))
    assert again["evaluator"] == "e3"
