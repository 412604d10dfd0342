"""What does the store cost per outcome? Draws synthetic outcomes for the first N trials of the synthetic scale
campaign (experiments/scale-synthetic.yaml, 10 hops) and times, per trial in milliseconds (best of --repeat):

    prepare (checking an outcome and its AttemptRecord and turning it into rows, no I/O; CPU time), record_plan of
    the whole 8,880-trial plan into a fresh store (wall), and write_outcomes of the N outcomes (prepare + artifact
    files + one SQLite transaction per batch; wall, and CPU time of all this process's threads).

    python benchmarks/store_write.py                 # 4,000 outcomes, batches of 2,000 (the scheduler's flush_max)
Everything here is SYNTHETIC: draws, not measurements of kernels or models.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outcomes", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from mkb_ray.campaign.config import load_experiment
    from mkb_ray.campaign.plan import plan_campaign
    from mkb_ray.campaign.reconcile import record_plan
    from mkb_ray.models.roster import load_roster
    from mkb_ray.store import RunStore
    from mkb_ray.store._outcome_rows import prepare
    from mkb_ray.synthetic import synthetic_outcome

    config = load_experiment(REPO / "experiments" / "scale-synthetic.yaml")
    config = config.model_copy(update={"chains": config.chains.model_copy(update={"hops": 10})})
    plan = plan_campaign(config, None, load_roster(), has_gpu=False).trials
    trials = plan[:args.outcomes]
    skills: dict[str, str] = {}
    outcomes = []
    for trial in trials:  # plan order: a hop's source comes before it
        outcome = synthetic_outcome(trial, skills.get(trial.skill_from or ""), config.synthetic)
        skills[trial.trial_id] = outcome.skill_md or ""
        outcomes.append(outcome)
    n = len(outcomes)

    best_prepare = min(_cpu(lambda: [prepare(o, True) for o in outcomes]) for _ in range(args.repeat))
    print(f"SYNTHETIC prepare        {best_prepare / n * 1e3:6.3f} ms per outcome ({n} outcomes)")

    best_plan = best_write = best_write_cpu = float("inf")
    for _ in range(args.repeat):
        work = Path(tempfile.mkdtemp(prefix="mkb-store-"))
        try:
            with RunStore(work / "run") as store:
                store.set_meta("{}", "h" * 64, synthetic=True)
                began = time.perf_counter()
                record_plan(store, plan)
                best_plan = min(best_plan, time.perf_counter() - began)
                began, began_cpu = time.perf_counter(), time.process_time()
                for start in range(0, n, args.batch):
                    store.write_outcomes(outcomes[start:start + args.batch])
                best_write = min(best_write, time.perf_counter() - began)
                best_write_cpu = min(best_write_cpu, time.process_time() - began_cpu)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(f"SYNTHETIC record_plan    {best_plan / len(plan) * 1e3:6.3f} ms per trial ({len(plan)} trials, wall)")
    print(f"SYNTHETIC write_outcomes {best_write / n * 1e3:6.3f} ms per outcome wall, "
          f"{best_write_cpu / n * 1e3:6.3f} ms CPU, all threads (batches of {args.batch})")


def _cpu(fn: Callable[[], object]) -> float:
    began = time.process_time()
    fn()
    return time.process_time() - began


if __name__ == "__main__":
    main()
