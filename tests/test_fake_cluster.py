"""`mkb run` on a Ray cluster that the real autoscaler grows and shrinks (Ray's fake multi-node provider: every
node is one more raylet on this machine, all on 127.0.0.1; mkb_ray/cluster/fake.py).

The campaigns are synthetic agents whose final kernels (the shipped TIRx solutions) are judged for real on CPU,
so every trial holds an agent slot for seconds. Placement is `roles`: trial tasks ask for `mkb_agent_cpu`, which
only the worker node type offers, and the head offers no CPU — so nothing runs until the autoscaler adds nodes.

Asserted: worker nodes are added when work arrives and removed when the cluster is idle; a worker node killed
mid-campaign loses no trial and duplicates none (its tasks are retried); a driver killed mid-campaign and
started again collects the attempts that finished while it was down — the very outcomes they spooled, not new
runs — and adopts the ones still running.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from mkb_ray.cluster.fake import FakeCluster, NodeType
from mkb_ray.models.processes import wait_for

pytestmark = [pytest.mark.ray, pytest.mark.judge]   # every campaign here judges its kernels for real

REPO = Path(__file__).resolve().parents[1]
MKB = [sys.executable, "-m", "mkb_ray.cli"]
AGENT_SLOTS = 2          # mkb_agent_cpu per node: attempts per node
MAX_NODES = 2
EVAL_SLOTS = 2           # with a real judge, a synthetic campaign keeps 2 trials in flight per judgement slot


@pytest.fixture(scope="module")
def cluster():
    agents = NodeType("mkb.agent", {"CPU": 2, "mkb_agent_cpu": AGENT_SLOTS}, min_workers=0, max_workers=MAX_NODES)
    with FakeCluster([agents], idle_timeout_s=5.0) as fake:
        yield fake


def _config(tmp_path: Path, name: str, replicates: int) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"""
name: {name}
models: [smollm2]
synthetic: {{seed: 1, judge: real}}
problems: {{ids: [mlp_norm/02_silu_and_mul, moe/01_topk_softmax_renorm]}}
benchmark: {{arms: [solo_tirx]}}
replicates: {replicates}
target: cpu
scheduler: {{placement: roles, evaluator_devices: cpu, evaluator_slots: {EVAL_SLOTS},
             model_concurrency: {{smollm2: {AGENT_SLOTS * MAX_NODES}}}, max_trial_retries: 3}}
""")
    return path


def _driver(cluster: FakeCluster, config: Path, run_dir: Path) -> subprocess.Popen:
    env = {**os.environ, **cluster.env}
    return subprocess.Popen([*MKB, "run", str(config), "--run-dir", str(run_dir), "--no-progress",
                             "--ray-address", cluster.address], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _rows(run_dir: Path, sql: str) -> list[tuple]:
    try:
        with sqlite3.connect(f"file:{run_dir / 'store.sqlite'}?mode=ro", uri=True) as conn:
            return conn.execute(sql).fetchall()
    except sqlite3.Error:
        return []


def _done(run_dir: Path) -> int:
    rows = _rows(run_dir, "SELECT count(*) FROM trials WHERE status != 'planned'")
    return rows[0][0] if rows else 0


def _finish(driver: subprocess.Popen, timeout: float) -> str:
    try:
        output, _ = driver.communicate(timeout=timeout)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    return output


def _node_processes(raylet: psutil.Process) -> list[psutil.Process]:
    try:
        return [raylet, *raylet.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _signal_all(procs: list[psutil.Process], signum: int) -> None:
    for proc in procs:
        try:
            proc.send_signal(signum)
        except psutil.NoSuchProcess:
            pass


def _freeze(raylet: psutil.Process) -> list[psutil.Process]:
    """SIGSTOP a worker node: its raylet, then every process under it, until no new one appears (a process not
    yet stopped may have started one). Returns them all."""
    frozen: dict[int, psutil.Process] = {}
    while True:
        new = [p for p in _node_processes(raylet) if p.pid not in frozen]
        if not new:
            return list(frozen.values())
        _signal_all(new, signal.SIGSTOP)
        frozen.update((p.pid, p) for p in new)


def _runs_a_trial(proc: psutil.Process) -> bool:
    """Whether this Ray worker is executing a trial task (Ray titles a worker `ray::<task>` while it runs one,
    `ray::IDLE` between tasks)."""
    try:
        title = (proc.cmdline() or [""])[0]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    return title.startswith("ray::") and "execute_batch" in title


def _kill_a_node_running_a_trial(cluster: FakeCluster, driver: subprocess.Popen, timeout_s: float) -> int:
    """Kill a worker node that is running a trial task, as a lost machine goes: its raylet and every process
    under it. Each node is frozen before it is looked at, so a trial seen running cannot finish (nor its worker
    report back) before the kill; a node running none is let go on. Returns the raylet's pid."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert driver.poll() is None, "the campaign finished before a node running a trial could be lost"
        for raylet in cluster.worker_raylets():
            frozen = _freeze(raylet)
            if any(_runs_a_trial(p) for p in frozen):
                _signal_all(frozen, signal.SIGKILL)
                psutil.wait_procs(frozen, timeout=10)
                return raylet.pid
            _signal_all(frozen, signal.SIGCONT)
        assert time.monotonic() < deadline, "no worker node was seen running a trial task"
        time.sleep(0.2)


def _all_once_and_completed(run_dir: Path) -> None:
    total = _rows(run_dir, "SELECT count(*) FROM trials")[0][0]
    assert total > 0
    assert _rows(run_dir, "SELECT count(*), count(DISTINCT trial_id) FROM trials") == [(total, total)]
    assert _rows(run_dir, "SELECT status, count(*) FROM trials GROUP BY status") == [("completed", total)]
    assert _rows(run_dir, "SELECT trial_id, is_final, count(*) FROM submissions GROUP BY trial_id, idx, is_final "
                          "HAVING count(*) > 1") == []
    # Every trial's final kernel was judged for real on the cluster and passed.
    not_passed = _rows(run_dir, "SELECT trial_id, tier, rejected_by, reason FROM submissions "
                                "WHERE is_final = 1 AND (tier IS NULL OR tier NOT LIKE 'pass%')")
    assert not not_passed, not_passed
    assert _rows(run_dir, "SELECT count(*) FROM submissions WHERE is_final = 1") == [(total,)]


def test_nodes_come_for_work_go_when_idle_and_a_lost_node_loses_no_trial(cluster, tmp_path):
    assert cluster.worker_raylets() == [], "the cluster starts with no worker node"
    run_dir = tmp_path / "run"
    driver = _driver(cluster, _config(tmp_path, "scale", replicates=5), run_dir)
    try:
        grew = wait_for(lambda: len(cluster.worker_raylets()) >= 2 or driver.poll() is not None, 180)
        assert grew and driver.poll() is None, "the autoscaler added no second node for 4 concurrent attempts"
        peak = len(cluster.worker_raylets())
        assert wait_for(lambda: _done(run_dir) >= 2 or driver.poll() is not None, 240)
        assert driver.poll() is None, "the campaign finished before a node could be lost: make it longer"
        _kill_a_node_running_a_trial(cluster, driver, 240)   # a lost machine, while it runs an attempt
        output = _finish(driver, 1200)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    assert driver.returncode == 0, output[-4000:]
    _all_once_and_completed(run_dir)
    retried = _rows(run_dir, "SELECT count(DISTINCT trial_id) FROM events WHERE kind = 'retry'")[0][0]
    assert retried >= 1, "no attempt was running on the lost node: the fault was not exercised"
    print(f"peak worker nodes {peak}, trials retried after the node loss {retried}")
    # Done: the evaluators went with the driver, nothing asks for mkb_agent_cpu, the autoscaler takes nodes down.
    assert wait_for(lambda: cluster.worker_raylets() == [], 120), "idle worker nodes were not removed"


def _spooled_records(run_dir: Path) -> dict[str, str]:
    """trial id -> sha256 of the record each spool file holds (what the attempt itself left behind)."""
    import hashlib

    found = {}
    for path in (run_dir / "spool").glob("*.json"):
        try:
            items = json.loads(path.read_text())
        except (OSError, ValueError):
            continue   # being renamed into place; the next poll reads it
        for item in items:
            found[item["trial_id"]] = hashlib.sha256(item["record_json"].encode()).hexdigest()
    return found


def test_a_killed_driver_restarted_collects_what_finished_meanwhile_and_adopts_the_rest(cluster, tmp_path):
    config = _config(tmp_path, "restart", replicates=5)
    run_dir = tmp_path / "run"
    driver = _driver(cluster, config, run_dir)
    try:
        assert wait_for(lambda: _done(run_dir) >= 2 or driver.poll() is not None, 300)
        assert driver.poll() is None, "the campaign finished before its driver could be killed: make it longer"
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    stored_at_kill = {row[0] for row in _rows(run_dir, "SELECT trial_id FROM trials WHERE status != 'planned'")}
    total = _rows(run_dir, "SELECT count(*) FROM trials")[0][0]
    assert len(stored_at_kill) < total
    # No driver: the attempts run on (their tasks are the launcher's) and leave their outcomes in the spool.
    assert wait_for(lambda: set(_spooled_records(run_dir)) - stored_at_kill, 180), \
        "no attempt finished while the driver was down"
    time.sleep(2)
    finished_meanwhile = {tid: sha for tid, sha in _spooled_records(run_dir).items() if tid not in stored_at_kill}

    restarted = _driver(cluster, config, run_dir)
    output = _finish(restarted, 1200)
    assert restarted.returncode == 0, output[-4000:]
    assert "launcher is still up" in output, output[-3000:]
    _all_once_and_completed(run_dir)
    # Collected, not run again: each stored record is the very one its attempt spooled while the driver was down
    # (a re-run would have judged the kernel again, with other timings, so another record).
    stored = dict(_rows(run_dir, "SELECT trial_id, record_sha FROM trials"))
    assert {tid: stored[tid] for tid in finished_meanwhile} == finished_meanwhile
    ingested = _rows(run_dir, "SELECT data FROM events WHERE kind = 'spool_ingested'")
    assert sum(json.loads(data)["trials"] for (data,) in ingested) >= len(finished_meanwhile)
    adopted = _rows(run_dir, "SELECT data FROM events WHERE kind = 'adopted'")
    print(f"stored at kill {len(stored_at_kill)}, finished while the driver was down {len(finished_meanwhile)}, "
          f"adopted events {[json.loads(d) for (d,) in adopted]}")
    assert list((run_dir / "spool").glob("*.json")) == [], "committed outcomes' spool files were not removed"
