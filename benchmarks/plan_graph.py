"""What does the dependency graph cost the driver? Plans the synthetic scale campaign
(experiments/scale-synthetic.yaml: 88,800 trials, 100-hop chains) and times, in CPU seconds of this process:

    planning (plan_campaign), the plan's graph checks (Plan(...)), depth(), the scheduler's priorities (building a
    Scheduler: the longest tail per trial), ready(set()), the descendants of every root, and draining the plan the
    way the scheduler does — `newly_ready` once per finished trial — reported per trial in microseconds; then the
    memory a plan holds per trial (tracemalloc; trials share their hash strings, so it stays a few hundred bytes).

    python benchmarks/plan_graph.py                 # the 100-hop campaign
    python benchmarks/plan_graph.py --hops 10       # cut to 10 hops (8,880 trials)
The planning time is the figure tests/test_plan.py used to assert (< 5 s); it is measured here instead.
"""
from __future__ import annotations

import argparse
import time
import tracemalloc
from collections import deque
from pathlib import Path
from typing import Callable, TypeVar

REPO = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def _timed(label: str, fn: Callable[[], T], per: int = 0) -> T:
    began = time.process_time()
    value = fn()
    spent = time.process_time() - began
    each = f"  ({spent / per * 1e6:6.2f} us per trial)" if per else ""
    print(f"{label:42} {spent:7.3f} s{each}", flush=True)
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hops", type=int, default=100, help="chain length (the shipped campaign: 100)")
    parser.add_argument("--repeat", type=int, default=3, help="drain the plan this many times")
    args = parser.parse_args()

    from mkb_ray.campaign.config import load_experiment
    from mkb_ray.campaign.plan import Plan, plan_campaign
    from mkb_ray.campaign.scheduler import Scheduler
    from mkb_ray.models.roster import load_roster

    config = load_experiment(REPO / "experiments" / "scale-synthetic.yaml")
    config = config.model_copy(update={"chains": config.chains.model_copy(update={"hops": args.hops})})
    roster = load_roster()
    plan = _timed("plan_campaign", lambda: plan_campaign(config, None, roster, has_gpu=False))
    n = len(plan)
    print(f"SYNTHETIC plan: {n} trials, depth {plan.depth()}")
    _timed("Plan(trials)", lambda: Plan(plan.trials, synthetic=True), per=n)
    _timed("depth()", plan.depth, per=n)
    # Its constructor touches no store (None here) and no Ray: it is the priorities that cost.
    _timed("Scheduler(...) (tail lengths)", lambda: Scheduler(plan, None, {}), per=n)
    roots = _timed("ready(set())", lambda: plan.ready(set()))
    _timed("import networkx (descendants' first call)", lambda: __import__("networkx"))
    _timed("descendants(roots)", lambda: plan.descendants([t.trial_id for t in roots]), per=n)

    def drain() -> int:
        done: set[str] = set()
        queue = deque(plan.ready(done))
        finished = 0
        while queue:
            tid = queue.popleft().trial_id
            done.add(tid)
            finished += 1
            queue.extend(plan.newly_ready(tid, done))
        return finished

    for _ in range(args.repeat):
        assert _timed("drain: newly_ready per trial", drain, per=n) == n

    tracemalloc.start()  # counts only what the fresh plan below allocates
    fresh = plan_campaign(config, None, roster, has_gpu=False)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    print(f"{'plan memory':42} {held / 2**20:7.1f} MB ({held / len(fresh):.0f} bytes per trial)")


if __name__ == "__main__":
    main()
