"""`mkb run` end to end on a local Ray (127.0.0.1) with the real store: resume after kill -9 of the driver, an
evaluator actor killed mid-evaluation, stale detection, malformed configs, and the results.json export.

Campaigns here are synthetic (labelled so in every record), which is what makes them fast and their outcomes
deterministic — so a resumed run can be compared trial by trial with an uninterrupted one. The evaluator fault
test judges real shipped kernels (synthetic agent, real judge)."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MKB = [sys.executable, "-m", "mkb_ray.cli"]


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _synthetic_config(tmp_path: Path, name: str, hops: int = 30, problems: int = 12, seed: int = 3) -> Path:
    return _write(tmp_path / f"{name}.yaml", f"""
name: {name}
models: [smollm2, glm-5.3]
synthetic: {{seed: {seed}}}
problems: {{synthetic: {problems}}}
chains: {{hops: {hops}, start_dsl: both, per_cell: 1, baselines: 1}}
benchmark: {{arms: [solo_cutedsl, solo_tirx, cutedsl2tirx_skill, tirx2cutedsl_skill]}}
target: gpu
""")


def _run(config: Path, run_dir: Path, *extra: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*MKB, "run", str(config), "--run-dir", str(run_dir), "--no-progress", *extra],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)


def _rows(run_dir: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(f"file:{run_dir / 'store.sqlite'}?mode=ro", uri=True) as conn:
        return conn.execute(sql).fetchall()


def _done_count(run_dir: Path) -> int:
    try:
        return _rows(run_dir, "SELECT count(*) FROM trials WHERE status != 'planned'")[0][0]
    except sqlite3.Error:
        return 0


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory):
    """An uninterrupted synthetic campaign: the truth a resumed run must match."""
    tmp = tmp_path_factory.mktemp("reference")
    config = _synthetic_config(tmp, "reference")
    result = _run(config, tmp / "run")
    assert result.returncode == 0, result.stderr[-3000:]
    return config, tmp / "run"


@pytest.mark.ray
def test_kill_9_of_the_driver_then_rerun_neither_duplicates_nor_loses_a_trial(reference_run, tmp_path):
    config, reference_dir = reference_run
    total = _rows(reference_dir, "SELECT count(*) FROM trials")[0][0]
    run_dir = tmp_path / "run"
    # Its own session, so that kill -9 takes the driver and the local Ray it started (a machine/driver crash).
    driver = subprocess.Popen([*MKB, "run", str(config), "--run-dir", str(run_dir), "--no-progress"], cwd=REPO,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while _done_count(run_dir) < 200 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert driver.poll() is None, "the campaign finished before it could be killed: make it longer"
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    written_at_kill = _done_count(run_dir)
    assert 0 < written_at_kill < total

    result = _run(config, run_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"{written_at_kill} already stored" in result.stdout
    # Every planned trial exactly once, each done, with exactly one record artifact and no duplicate child rows.
    assert _rows(run_dir, "SELECT count(*), count(DISTINCT trial_id) FROM trials") == [(total, total)]
    assert _rows(run_dir, "SELECT count(*) FROM trials WHERE status = 'planned' OR record_sha IS NULL") == [(0,)]
    assert _rows(run_dir, "SELECT trial_id, idx, is_final, count(*) FROM submissions "
                          "GROUP BY trial_id, idx, is_final HAVING count(*) > 1") == []
    # Synthetic draws are deterministic: the resumed campaign equals the uninterrupted one, trial by trial.
    query = "SELECT trial_id, status, final_tier, skill_sha FROM trials ORDER BY trial_id"
    assert _rows(run_dir, query) == _rows(reference_dir, query)
    assert _rows(run_dir, "SELECT count(*) FROM trials WHERE synthetic = 1") == [(total,)]


@pytest.mark.ray
def test_ctrl_c_stops_cleanly_and_the_rerun_finishes(reference_run, tmp_path):
    config, reference_dir = reference_run
    run_dir = tmp_path / "run"
    driver = subprocess.Popen([*MKB, "run", str(config), "--run-dir", str(run_dir), "--no-progress"], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while _done_count(run_dir) < 100 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert driver.poll() is None, "the campaign finished before Ctrl-C: make it longer"
        driver.send_signal(signal.SIGINT)  # what Ctrl-C sends the driver
        output, _ = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    assert driver.returncode == 130, output[-3000:]
    assert "interrupted" in output and "run the same command again" in output
    assert _rows(run_dir, "SELECT count(*) FROM events WHERE kind = 'interrupted'") == [(1,)]
    stopped_at = _done_count(run_dir)
    result = _run(config, run_dir)
    assert result.returncode == 0 and f"{stopped_at} already stored" in result.stdout
    query = "SELECT trial_id, status, final_tier, skill_sha FROM trials ORDER BY trial_id"
    assert _rows(run_dir, query) == _rows(reference_dir, query)


@pytest.mark.ray   # reference_run runs `mkb run`, which starts a local Ray
def test_rerun_of_a_finished_campaign_runs_nothing(reference_run):
    config, run_dir = reference_run
    result = _run(config, run_dir)
    assert result.returncode == 0
    total = _rows(run_dir, "SELECT count(*) FROM trials")[0][0]
    assert f"{total} already stored, 0 to run" in result.stdout
    assert "SYNTHETIC" in result.stdout


@pytest.mark.ray   # `mkb run` starts a local Ray
def test_stale_trials_are_reported_and_rerun_only_when_asked(tmp_path):
    run_dir = tmp_path / "run"
    first = _synthetic_config(tmp_path, "stale", hops=3, problems=2, seed=1)
    assert _run(first, run_dir).returncode == 0
    before = dict(_rows(run_dir, "SELECT trial_id, config_hash FROM trials"))
    # A different calibration changes every trial's attempt config hash.
    changed = _synthetic_config(tmp_path, "stale", hops=3, problems=2, seed=2)
    result = _run(changed, run_dir)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"{len(before)} stored trial(s) are stale" in result.stdout
    assert dict(_rows(run_dir, "SELECT trial_id, config_hash FROM trials")) == before  # kept as they were

    result = _run(changed, run_dir, "--rerun-stale")
    assert result.returncode == 0, result.stderr[-2000:]
    after = dict(_rows(run_dir, "SELECT trial_id, config_hash FROM trials"))
    assert after.keys() == before.keys() and all(after[t] != before[t] for t in before)
    assert _rows(run_dir, "SELECT count(*) FROM trials WHERE status = 'planned'") == [(0,)]
    assert _rows(run_dir, "SELECT count(*) FROM events WHERE kind = 'rerun_stale'") == [(len(before),)]


@pytest.mark.parametrize("body, field", [
    ("name: bad\nmodels: [smollm2]\nchains: {hops: 0}\n", "chains.hops"),
    ("name: bad\nmodels: [smollm2]\nbenchmark: {arms: [solo_tirx]}\nreplicatez: 2\n", "replicatez"),
    ("name: bad\nmodels: [no-such-model]\nbenchmark: {arms: [solo_tirx]}\n", "no-such-model"),
    ("name: bad\nmodels: [smollm2\n", "invalid YAML"),
])
@pytest.mark.ray  # it runs `mkb run`, which refuses these before starting Ray; conftest marks by the command
def test_a_malformed_config_is_refused_naming_file_and_field(tmp_path, body, field):
    config = _write(tmp_path / "bad.yaml", body)
    result = _run(config, tmp_path / "run", timeout=60)
    assert result.returncode == 2
    assert str(config) in result.stderr and field in result.stderr
    assert not (tmp_path / "run").exists(), "a refused config must not create a run directory"


@pytest.mark.ray   # reference_run runs `mkb run`, which starts a local Ray
def test_results_json_export_matches_the_store(reference_run, tmp_path):
    _, run_dir = reference_run
    out = tmp_path / "export"
    result = subprocess.run([*MKB, "export", str(run_dir), "--results-json", "--parquet", "--out", str(out)],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    stored = {(tid, tier) for tid, tier in _rows(run_dir, "SELECT trial_id, final_tier FROM trials")}
    models = {m for (m,) in _rows(run_dir, "SELECT DISTINCT model FROM trials")}
    exported = set()
    for model in models:
        data = json.loads((out / model / "results.json").read_text())
        assert data["synthetic"] is True
        exported |= {(a["trial_id"], a["tier"]) for a in data["attempts"]}
    assert exported == stored
    import polars as pl

    trials = pl.read_parquet(out / "trials.parquet")
    assert trials.height == len(stored) and trials["synthetic"].all()


@pytest.mark.ray
@pytest.mark.judge   # a real EvaluatorActor judges every trial's kernel
def test_an_evaluator_killed_mid_evaluation_restarts_and_the_campaign_finishes(tmp_path, local_ray):
    """Synthetic agent, real judge: each trial's final kernel (the shipped CPU TIRx solution) is judged by a real
    EvaluatorActor; the actor is killed while it judges, Ray restarts it, the submission is judged again."""
    from mkb_ray.campaign.build import build_scheduler, plan_run
    from mkb_ray.campaign.config import load_experiment
    from mkb_ray.campaign.reconcile import record_plan
    from mkb_ray.campaign.services import start_evaluators
    from mkb_ray.store.sqlite_store import RunStore

    config = load_experiment(_write(tmp_path / "fault.yaml", """
name: fault
models: [smollm2]
synthetic: {seed: 0, judge: real}
problems: {ids: [mlp_norm/01_fused_add_rmsnorm, quantization/01_per_token_fp8_quant]}
benchmark: {arms: [solo_tirx]}
replicates: 2
target: cpu
"""))
    campaign = plan_run(config, has_gpu=False)
    plan = campaign.plan
    pool = start_evaluators("cpu", 1, None)
    evaluator = pool.handles[0]
    with RunStore(tmp_path / "run") as store:
        record_plan(store, plan.trials)
        scheduler = build_scheduler(campaign, store, evaluator=pool)
        assert scheduler.models["smollm2"].context.real_judge
        result: dict = {}
        runner = threading.Thread(target=lambda: result.update(run=scheduler.run()))
        runner.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if local_ray.get(evaluator.get_stats.remote())["busy_slots"] > 0:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the evaluator never started judging")
        local_ray.kill(evaluator, no_restart=False)
        runner.join(900)   # returns as soon as the campaign ends; the bound is only for a hung one
        assert not runner.is_alive()
        assert result["run"].written == len(plan) and not result["run"].interrupted
        rows = list(store.trial_rows())
        reasons = {r.trial_id: json.loads(store.record_json(r.trial_id) or "{}").get("final_verdict", {})
                   for r in rows}
    assert {r.status for r in rows} == {"completed"}
    # The real judge's verdicts: the shipped CPU solutions pass (a killed evaluation was judged again).
    not_passed = [f"{tid}: {v.get('tier')} by {v.get('rejected_by')}: {v.get('reason')}"
                  for tid, v in reasons.items() if v.get("tier") not in ("pass", "pass2x")]
    assert not not_passed, "\n".join(not_passed)
    assert {r.final_tier for r in rows} <= {"pass", "pass2x"}
    assert all(r.synthetic for r in rows)
