"""How does the campaign machinery scale? Runs the synthetic scale campaign (experiments/scale-synthetic.yaml:
6 models × 74 synthetic problems × 2 directions × 100 hops = 88,800 attempts) through real Ray and the real
SQLite store, and the same campaign cut to 10 hops (8,880 attempts), side by side in one run, printing:

    total wall time, overhead per attempt (wall / attempts — synthetic attempts are ~0.25 ms of draws, so nearly
    all of it is planning, dispatch, Ray, the store and artifact files), the draw cost alone, driver peak RSS,
    Ray workers' peak RSS, and the ratios between the two sizes (how cost grows with N).

    python benchmarks/scheduler_scale.py                   # both sizes (~a few minutes on 2 cores)
    python benchmarks/scheduler_scale.py --hops 10         # only the small one
    python benchmarks/scheduler_scale.py --fake-nodes 4    # also on a 4-node fake autoscaling cluster

With --fake-nodes N, every size also runs on a fake multi-node cluster (mkb_ray/cluster/fake.py: the real
autoscaler, N worker nodes of one agent slot each, all raylets on this machine, loopback only) through the full
cluster path — `roles` placement, the detached trial launcher owning every task, outcomes spooled by the tasks
and artifacts written by them — and each row prints next to its single-node twin. On one machine the N nodes
share its cores, so the comparison measures the cluster path's overhead, not a speed-up.
Everything here is SYNTHETIC: draws, not measurements of kernels or models.
"""
from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Measurement:
    attempts: int
    plan_s: float
    run_s: float
    draw_s_per_attempt: float
    driver_peak_mb: float
    workers_peak_mb: float
    store_mb: float

    @property
    def overhead_ms(self) -> float:
        return (self.plan_s + self.run_s) / self.attempts * 1e3 - self.draw_s_per_attempt * 1e3


class _PeakSampler:
    """Samples the driver's RSS and the summed RSS of Ray's processes every 0.2 s: the driver's descendants (the
    local Ray), or, on a fake cluster, `ray_processes()` (its nodes are not the driver's children)."""

    def __init__(self, ray_processes=None) -> None:
        self.ray_processes = ray_processes
        self.driver_mb = self.workers_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            self.driver_mb = max(self.driver_mb, me.memory_info().rss / 2**20)
            workers = 0.0
            # Ray's processes for this driver (gcs, raylet, workers) are its descendants: other Rays don't count.
            procs = self.ray_processes() if self.ray_processes else me.children(recursive=True)
            for proc in procs:
                try:
                    workers += proc.memory_info().rss / 2**20
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            self.workers_mb = max(self.workers_mb, workers)
            self._stop.wait(0.2)

    def __enter__(self) -> "_PeakSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _draw_cost(config, plan, samples: int = 300) -> float:
    """Seconds per synthetic_outcome, measured alone in this process (hop-0 and later hops mixed)."""
    from mkb_ray.synthetic import synthetic_outcome

    trials = plan.trials[:samples]
    skills: dict[str, str] = {}
    began = time.perf_counter()
    for trial in trials:
        outcome = synthetic_outcome(trial, skills.get(trial.skill_from or "", None), config.synthetic)
        skills[trial.trial_id] = outcome.skill_md or ""
    return (time.perf_counter() - began) / len(trials)


def measure(hops: int, work: Path, cluster: bool = False, ray_processes=None) -> Measurement:
    """One size through the campaign builder, as `mkb run` wires it (on a cluster: the launcher, the spool and
    the `roles` placement); plan_s counts the roster, the plan and its sync with the store."""
    from mkb_ray.campaign.build import build_scheduler, durable_parts, plan_run
    from mkb_ray.campaign.config import load_experiment
    from mkb_ray.campaign.placement import Placement
    from mkb_ray.campaign.reconcile import record_plan
    from mkb_ray.store.sqlite_store import RunStore

    config = load_experiment(REPO / "experiments" / "scale-synthetic.yaml")
    config = config.model_copy(update={"chains": config.chains.model_copy(update={"hops": hops})})
    run_dir = work / f"hops{hops}{'-cluster' if cluster else ''}"
    with _PeakSampler(ray_processes) as sampler:
        began = time.perf_counter()
        campaign = plan_run(config, has_gpu=False)
        plan = campaign.plan
        with RunStore(run_dir) as store:
            record_plan(store, plan.trials)
            plan_s = time.perf_counter() - began
            began = time.perf_counter()
            durable = durable_parts(store.run_dir, None) if cluster else None
            placement = Placement.of("roles") if cluster else Placement()
            result = build_scheduler(campaign, store, durable=durable, placement=placement).run()
            run_s = time.perf_counter() - began
            assert result.written == len(plan), (result.written, len(plan))
            assert store.status_counts().get("planned", 0) == 0
    store_mb = sum(f.stat().st_size for f in run_dir.rglob("*") if f.is_file()) / 2**20
    draw_s = _draw_cost(config, plan)
    return Measurement(len(plan), plan_s, run_s, draw_s, sampler.driver_mb, sampler.workers_mb, store_mb)


def _print(where: str, m: Measurement) -> None:
    print(f"SYNTHETIC {where:>14} {m.attempts:>6} attempts: plan {m.plan_s:6.1f} s, run {m.run_s:7.1f} s, "
          f"overhead {m.overhead_ms:5.2f} ms/attempt (+ {m.draw_s_per_attempt * 1e3:.2f} ms of draws), "
          f"driver peak {m.driver_peak_mb:6.0f} MB, Ray processes peak {m.workers_peak_mb:6.0f} MB, "
          f"store {m.store_mb:6.0f} MB", flush=True)


def _measure_on_fake_cluster(nodes: int, hops_list: list[int], work: Path) -> list[Measurement]:
    """Every size again on a fake cluster of `nodes` one-slot agent nodes, all up before timing starts."""
    import os

    import ray

    from mkb_ray.cluster.fake import FakeCluster, NodeType
    from mkb_ray.models.processes import wait_for

    agent = NodeType("mkb.agent", {"CPU": 1, "mkb_agent_cpu": 1}, min_workers=nodes, max_workers=nodes)
    rows = []
    with FakeCluster([agent], idle_timeout_s=60.0) as cluster:
        os.environ.update(cluster.env)
        if not wait_for(lambda: len(cluster.worker_raylets()) >= nodes, 240):
            raise RuntimeError(f"the fake cluster did not bring up {nodes} worker nodes in 240 s")
        ray.init(address=cluster.address, log_to_driver=False)
        try:
            for hops in hops_list:
                rows.append(measure(hops, work, cluster=True, ray_processes=cluster.processes))
                _print(f"{nodes} fake nodes", rows[-1])
        finally:
            ray.shutdown()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hops", type=int, nargs="+", default=[10, 100], help="chain lengths to measure")
    parser.add_argument("--keep", type=Path, default=None, help="keep the run directories here")
    parser.add_argument("--fake-nodes", type=int, default=0, metavar="N",
                        help="also run every size on a fake autoscaling cluster of N worker nodes (N >= 1)")
    args = parser.parse_args()

    import ray

    from mkb_ray.models.local_ray import init_local_ray

    init_local_ray(num_cpus=2)
    work = args.keep or Path(tempfile.mkdtemp(prefix="mkb-scale-"))
    rows = []
    cluster_rows: list[Measurement] = []
    try:
        for hops in args.hops:
            rows.append(measure(hops, work))
            _print("single node", rows[-1])
        ray.shutdown()
        if args.fake_nodes > 0:
            cluster_rows = _measure_on_fake_cluster(args.fake_nodes, args.hops, work)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    for single, multi in zip(rows, cluster_rows):
        print(f"side by side, {single.attempts} attempts: wall {single.plan_s + single.run_s:.1f} s (1 node) vs "
              f"{multi.plan_s + multi.run_s:.1f} s ({args.fake_nodes} fake nodes), x"
              f"{(multi.plan_s + multi.run_s) / (single.plan_s + single.run_s):.2f}; overhead "
              f"{single.overhead_ms:.2f} vs {multi.overhead_ms:.2f} ms/attempt; driver peak "
              f"{single.driver_peak_mb:.0f} vs {multi.driver_peak_mb:.0f} MB")
    if len(rows) >= 2:
        small, large = rows[0], rows[-1]
        n = large.attempts / small.attempts
        wall = (large.plan_s + large.run_s) / (small.plan_s + small.run_s)
        print(f"ratios {large.attempts} / {small.attempts} attempts (x{n:.0f}): wall x{wall:.1f}, "
              f"overhead per attempt x{large.overhead_ms / small.overhead_ms:.2f}, driver peak RSS "
              f"x{large.driver_peak_mb / small.driver_peak_mb:.2f}, Ray processes peak RSS "
              f"x{large.workers_peak_mb / small.workers_peak_mb:.2f}")
    print(f"driver ru_maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
