"""The run store (mkb_ray.store): plan sync, atomic idempotent outcome batches, durability under kill -9, stale
trials. Real SQLite on tmp_path, outcomes built from real pydantic AttemptRecords; no Ray."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path
from typing import Optional

import pytest

from mkb_ray.records import Trial, TrialOutcome
from mkb_ray.records import AttemptConfig, AttemptRecord, LLMCallRecord, LLMUsage, SubmissionRecord
from mkb_ray.store import (ArtifactStore, OutcomeConflict, RecordError, RunStore, StoreError, StoreLocked)
from mkb_ray.campaign.reconcile import finished_dependants, record_plan, rerun_stale
from mkb_ray.store._outcome_rows import ArtifactRow, SkillRow, SubmissionRow, UsageRow
from mkb_ray.store._schema import OUTCOME_COLUMNS, PLAN_COLUMNS, TRIAL_ROW_COLUMNS
from mkb_ray.records import CheckResult, Verdict

REPO = Path(__file__).resolve().parent.parent
MODEL = "smollm2"
PROBLEMS = ("mlp_norm/01_fused_add_rmsnorm", "attention/01_gqa_paged_decode")
NOW = "2026-11-30T12:00:00+00:00"


# -- builders: realistic trials and outcomes ----------------------------------------------------------------------
def make_trials(model: str = MODEL, problems=PROBLEMS, replicates: int = 1, hops: int = 3,
                config_hash: str = "c" * 64, problem_hash: str = "p" * 64) -> list[Trial]:
    """The benchmark arms of each problem (two solos, two skill directions) and one chain per problem."""
    trials: list[Trial] = []
    common = dict(model=model, target="gpu", config_hash=config_hash, problem_hash=problem_hash,
                  template_hash="t" * 64)
    for problem in problems:
        for r in range(replicates):
            base = f"{model}/{problem}/r{r}"
            for dsl in ("cutedsl", "tirx"):
                trials.append(Trial(f"{base}/solo_{dsl}", problem_id=problem, dsl=dsl, arm="solo", kind="benchmark",
                                    replicate=r, arm_name=f"solo_{dsl}", **common))
            for src, dst in (("cutedsl", "tirx"), ("tirx", "cutedsl")):
                trials.append(Trial(f"{base}/{src}2{dst}_skill", problem_id=problem, dsl=dst, arm="skill",
                                    kind="benchmark", replicate=r, arm_name=f"{src}2{dst}_skill",
                                    skill_from=f"{base}/solo_{src}", **common))
        for hop in range(hops):
            dsl = ("cutedsl", "tirx")[hop % 2]
            trials.append(Trial(f"{model}/{problem}/chain0/h{hop}", problem_id=problem, dsl=dsl,
                                arm="solo" if hop == 0 else "skill", kind="chain_hop", chain=0, hop=hop,
                                skill_from=None if hop == 0 else f"{model}/{problem}/chain0/h{hop - 1}", **common))
    return trials


def make_verdict(trial: Trial, tier: str, seed: int = 0) -> Verdict:
    passed = tier in ("pass", "pass2x")
    speedup = {"pass2x": 2.5, "pass": 1.2}.get(tier)
    kernel_ms = 0.4 + seed * 0.01 if passed else None
    return Verdict(
        problem_id=trial.problem_id, problem_hash=trial.problem_hash, source_hash=f"{seed:064x}", dsl=trial.dsl,
        device="cuda", preset="production", seed=seed, target="sm_90a", compiled=True, executed=True,
        correct=passed, tier=tier, kernel_ms=kernel_ms, eager_ms=kernel_ms * speedup if passed else 0.9,
        speedup=speedup, rejected_by=None if passed else "correctness",
        reason="ok" if passed else "max abs error 3e-2 exceeds the allowance",
        timing_method="cuda_events_l2_flush", timed_draws=50, device_name="NVIDIA H200",
        checks=[CheckResult(name="static", passed=True, detail="no banned calls"),
                CheckResult(name="correctness", passed=passed, detail="5 draws")],
        wall_s=3.5, worker_s=3.1, compile_s=0.8)


def make_outcome(trial: Trial, tier: str = "pass", status: str = "completed", n_submissions: int = 3,
                 n_calls: int = 4, synthetic: bool = False, skill: Optional[str] = None,
                 attempts: int = 1) -> TrialOutcome:
    """A TrialOutcome whose record_json is a real AttemptRecord (pydantic), with its kernels as artifacts."""
    if status == "infra_error":
        return TrialOutcome(trial.trial_id, "infra_error", None, {}, synthetic=synthetic, attempts=attempts,
                            error="RayTaskError: worker died")
    artifacts: dict[str, bytes] = {}
    submissions = []
    for i in range(1, n_submissions + 1):
        source = f"# {trial.trial_id} submission {i}\ndef solve(*inputs):\n    return inputs[0]\n".encode()
        path = f"submissions/{i:02d}.py"
        artifacts[path] = source
        last = i == n_submissions
        verdict = make_verdict(trial, tier if last else "fail", seed=i)
        submissions.append(SubmissionRecord(
            index=i, counted=True, kernel_sha256=hashlib.sha256(source).hexdigest(), kernel_bytes=len(source),
            artifact_path=path, verdict_path=f"submissions/{i:02d}.verdict.json", verdict=verdict,
            submitted_at=NOW, attempt_clock_s=10.0 * i, round_trip_s=5.0, eval_s=3.5, queue_wait_s=1.5))
    if n_submissions:  # one refused submission past the budget, never judged
        submissions.append(SubmissionRecord(index=n_submissions + 1, counted=False, refused_reason="budget spent",
                                            submitted_at=NOW, attempt_clock_s=99.0))
    calls = [LLMCallRecord(index=i, turn=i, purpose="turn" if i < n_calls - 1 else "skill", started_at=NOW,
                           attempt_clock_s=float(i), ok=True, reply_chars=1200,
                           usage=LLMUsage(prompt_tokens=1000 + i, completion_tokens=300, cached_tokens=800,
                                          latency_s=2.0, cost_usd=0.001, gpu_s=2.0))
             for i in range(n_calls)]
    skill_md = skill if skill is not None else f"# SKILL\n- {trial.problem_id}: fuse the reduction ({trial.dsl})\n"
    final = None
    final_kernel_path = None
    if n_submissions and status == "completed":
        final_kernel_path = "final_kernel.py"
        artifacts[final_kernel_path] = artifacts[f"submissions/{n_submissions:02d}.py"]
        final = make_verdict(trial, tier, seed=n_submissions)
    artifacts["SKILL.md"] = skill_md.encode()
    artifacts["transcript.jsonl"] = json.dumps({"role": "user", "content": trial.trial_id}).encode() + b"\n"
    arm = trial.arm
    record = AttemptRecord(
        config=AttemptConfig(problem_id=trial.problem_id, dsl=trial.dsl, target=trial.target, model=trial.model,
                             arm=arm, skill_path=Path("source/SKILL.md") if arm == "skill" else None,
                             out_dir=Path("attempts") / trial.trial_id, attempt_id=trial.trial_id),
        status="completed" if status == "infra_error" else status,
        stop_reason="empty_source_skill" if status == "skipped" else "finished",
        error="model endpoint kept failing" if status == "error" else None, synthetic=synthetic,
        problem_hash=trial.problem_hash, template_hash=trial.template_hash, model=trial.model,
        turns=n_calls, submissions=submissions, llm_calls=calls, final_verdict=final,
        final_kernel_path=final_kernel_path, skill_md_path="SKILL.md", skill_md_bytes=len(skill_md.encode()),
        transcript_path="transcript.jsonl", wall_s=120.0, attempt_clock_s=110.0, queue_wait_s=1.5 * n_submissions,
        prompt_tokens=sum(c.usage.prompt_tokens for c in calls), completion_tokens=300 * n_calls,
        cached_tokens=800 * n_calls, cost_usd=0.001 * n_calls, gpu_s=2.0 * n_calls, started_at=NOW, finished_at=NOW)
    return TrialOutcome(trial.trial_id, status, record.model_dump_json(), artifacts, synthetic=synthetic,
                        attempts=attempts, final_tier=final.tier if final else None, skill_md=skill_md)


def tiers_for(trials: list[Trial]) -> dict[str, str]:
    cycle = ("pass", "fail", "pass2x")
    return {t.trial_id: cycle[i % 3] for i, t in enumerate(trials)}


@pytest.fixture
def planned(tmp_path: Path):
    trials = make_trials()
    store = RunStore(tmp_path / "run")
    store.set_meta(json.dumps({"name": "test"}), "h" * 64, synthetic=False)
    record_plan(store, trials)
    yield store, trials
    store.close()


def count(store: RunStore, sql: str, *params) -> int:
    return store.connection.execute(sql, params).fetchone()[0]


# -- artifacts ----------------------------------------------------------------------------------------------------
def test_artifacts_are_content_addressed_and_idempotent(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    sha = store.put(b"kernel source")
    assert sha == hashlib.sha256(b"kernel source").hexdigest()
    assert store.path(sha) == tmp_path / "artifacts" / sha[:2] / sha
    mtime = store.path(sha).stat().st_mtime_ns
    assert store.put(b"kernel source") == sha                      # second put: no rewrite
    assert store.path(sha).stat().st_mtime_ns == mtime
    assert store.get(sha) == b"kernel source" and store.verify(sha)
    assert not list((tmp_path / "artifacts").rglob("*.tmp"))
    with pytest.raises(KeyError):
        store.get("0" * 64)
    with pytest.raises(ValueError):
        store.path("../etc/passwd")


# -- plan ---------------------------------------------------------------------------------------------------------
def test_plan_and_done_ids(planned) -> None:
    store, trials = planned
    assert store.status_counts() == {"planned": len(trials)}
    assert store.done_ids() == set()
    sync = record_plan(store, trials)                                  # the same plan again: nothing new
    assert sync.new_ids == () and sync.pending_ids == tuple(t.trial_id for t in trials) and sync.stale_ids == ()

    first = trials[:4]
    store.write_outcomes([make_outcome(t) for t in first])
    assert store.done_ids() == {t.trial_id for t in first}
    assert store.status_counts() == {"planned": len(trials) - 4, "completed": 4}

    more = make_trials(problems=PROBLEMS + ("moe/01_topk_routing",))
    sync = record_plan(store, more)
    assert set(sync.done_ids) == {t.trial_id for t in first}
    assert set(sync.new_ids) == {t.trial_id for t in more if t.problem_id == "moe/01_topk_routing"}
    assert sync.stale_ids == () and sync.unplanned_ids == ()
    rows = {r.trial_id: r for r in store.trial_rows()}
    skill = rows[f"{MODEL}/{PROBLEMS[1]}/r0/cutedsl2tirx_skill"]
    assert skill.depends_on == (f"{MODEL}/{PROBLEMS[1]}/r0/solo_cutedsl",) and skill.status == "planned"
    assert [r.plan_order for r in store.trial_rows()] == sorted(r.plan_order for r in rows.values())
    chain = f"{MODEL}/{PROBLEMS[0]}/chain0"
    assert store.dependants([f"{chain}/h0"]) == {f"{chain}/h1", f"{chain}/h2"}
    assert store.dependants([f"{chain}/h1", f"{chain}/h0"]) == {f"{chain}/h2"}      # never the starts themselves
    solo = f"{MODEL}/{PROBLEMS[0]}/r0/solo_tirx"
    assert store.dependants([solo]) == {f"{MODEL}/{PROBLEMS[0]}/r0/tirx2cutedsl_skill"}
    assert store.dependants(["not/stored"]) == set()


def test_outcome_rows_match_the_record(planned) -> None:
    store, trials = planned
    trial = trials[0]
    outcome = make_outcome(trial, tier="pass2x", n_submissions=3, n_calls=5, attempts=2)
    store.write_outcomes([outcome])
    row = store.trial(trial.trial_id)
    assert row.status == "completed" and row.final_tier == "pass2x" and row.attempts == 2 and not row.synthetic
    assert row.n_submissions == 4 and row.counted_submissions == 3 and row.prompt_tokens == sum(1000 + i
                                                                                              for i in range(5))
    assert store.record_json(trial.trial_id) == outcome.record_json
    subs = store.connection.execute(
        "SELECT idx, is_final, counted, refused_reason, kernel_sha, tier, correct, speedup FROM submissions "
        "WHERE trial_id = ? ORDER BY idx", (trial.trial_id,)).fetchall()
    final_sha = hashlib.sha256(outcome.artifacts["final_kernel.py"]).hexdigest()
    assert subs[0] == (0, 1, None, None, final_sha, "pass2x", 1, 2.5)              # the final verdict row
    assert [s[0] for s in subs[1:]] == [1, 2, 3, 4]
    assert [s[5] for s in subs[1:]] == ["fail", "fail", "pass2x", None]
    assert subs[4][2:4] == (0, "budget spent")
    for idx in (1, 2, 3):
        assert subs[idx][4] == hashlib.sha256(outcome.artifacts[f"submissions/{idx:02d}.py"]).hexdigest()
        assert store.artifacts.get(subs[idx][4]) == outcome.artifacts[f"submissions/{idx:02d}.py"]
    usage = store.connection.execute("SELECT idx, turn, purpose, ok, prompt_tokens, cached_tokens, cost_usd "
                                     "FROM usage WHERE trial_id = ? ORDER BY idx", (trial.trial_id,)).fetchall()
    assert usage[0] == (0, 0, "turn", 1, 1000, 800, 0.001) and usage[-1][2] == "skill" and len(usage) == 5
    assert store.skill_text(trial.trial_id) == outcome.skill_md
    assert store.skill_text(trials[1].trial_id) is None                             # not done
    names = dict(store.connection.execute("SELECT name, sha256 FROM artifacts WHERE trial_id = ?",
                                          (trial.trial_id,)).fetchall())
    assert set(names) == set(outcome.artifacts)
    assert all(store.artifacts.get(sha) == outcome.artifacts[name] for name, sha in names.items())


def test_statuses_without_verdicts(planned) -> None:
    store, trials = planned
    store.write_outcomes([make_outcome(trials[0], status="infra_error", attempts=3),
                          make_outcome(trials[1], status="error", n_submissions=0),
                          make_outcome(trials[2], status="skipped", n_submissions=0, n_calls=0, skill="")])
    rows = {r.trial_id: r for r in store.trial_rows()}
    infra, err, skipped = rows[trials[0].trial_id], rows[trials[1].trial_id], rows[trials[2].trial_id]
    assert (infra.status, infra.attempts, infra.record_sha, infra.error) == ("infra_error", 3, None,
                                                                              "RayTaskError: worker died")
    assert err.status == "error" and err.error == "model endpoint kept failing" and err.final_tier is None
    assert skipped.status == "skipped" and skipped.stop_reason == "empty_source_skill"
    assert store.skill_text(trials[2].trial_id) == ""                                # an empty SKILL.md is kept
    assert count(store, "SELECT COUNT(*) FROM submissions WHERE trial_id IN (?, ?, ?)",
                 *(t.trial_id for t in trials[:3])) == 0


# -- atomicity and idempotency -----------------------------------------------------------------------------------
def snapshot(store: RunStore) -> dict[str, list]:
    return {table: sorted(store.connection.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
            for table in ("trials", "submissions", "usage", "skills", "artifacts")}


def test_a_batch_with_one_malformed_record_leaves_nothing(planned) -> None:
    store, trials = planned
    store.write_outcomes([make_outcome(trials[0])])
    before = snapshot(store)
    good = [make_outcome(t) for t in trials[1:4]]
    # The fourth outcome's record gives a number as text: its validation refuses the batch before anything is
    # written (test_a_batch_sqlite_refuses_midway_is_rolled_back fails it inside the transaction).
    bad_record = json.loads(make_outcome(trials[4]).record_json)
    bad_record["submissions"][1]["verdict"]["speedup"] = "fast"
    bad = replace(make_outcome(trials[4]), record_json=json.dumps(bad_record))
    with pytest.raises(RecordError) as err:
        store.write_outcomes(good + [bad])
    assert err.value.trial_id == trials[4].trial_id
    assert err.value.field == "submissions[1].verdict.speedup"
    assert trials[4].trial_id in str(err.value)
    assert snapshot(store) == before
    assert store.done_ids() == {trials[0].trial_id}
    store.write_outcomes(good)                                      # the good ones go through afterwards
    assert store.done_ids() == {t.trial_id for t in trials[:4]}


def test_a_batch_sqlite_refuses_midway_is_rolled_back(planned) -> None:
    store, trials = planned
    store.write_outcomes([make_outcome(trials[0])])
    before = snapshot(store)
    good = [make_outcome(t) for t in trials[1:4]]
    # A valid record whose integer does not fit SQLite's 64 bits: refused by SQLite only after the batch's trial
    # updates and the first three trials' submissions were executed in the transaction.
    bad_record = json.loads(make_outcome(trials[4]).record_json)
    bad_record["submissions"][1]["kernel_bytes"] = 2**63
    bad = replace(make_outcome(trials[4]), record_json=json.dumps(bad_record))
    with pytest.raises(StoreError, match="refused by SQLite, nothing written"):
        store.write_outcomes(good + [bad])
    assert snapshot(store) == before
    assert store.done_ids() == {trials[0].trial_id}
    store.write_outcomes(good)
    assert store.done_ids() == {t.trial_id for t in trials[:4]}


def test_row_types_are_the_tables_columns(planned) -> None:
    store, _ = planned

    def columns(table: str) -> tuple[str, ...]:
        return tuple(r[1] for r in store.connection.execute(f"PRAGMA table_info({table})"))

    # A stored trial reads back as its plan row's columns, then its outcome's: the table's, in order.
    assert columns("trials") == PLAN_COLUMNS + OUTCOME_COLUMNS == TRIAL_ROW_COLUMNS
    for table, row in (("submissions", SubmissionRow), ("usage", UsageRow), ("skills", SkillRow),
                       ("artifacts", ArtifactRow)):
        assert columns(table) == row._fields, table


@pytest.mark.parametrize("mutate, field", [
    (lambda r: r.pop("submissions"), "submissions"),
    (lambda r: r["llm_calls"][2].__setitem__("ok", "yes"), "llm_calls[2].ok"),
    (lambda r: r["submissions"][0]["verdict"].__setitem__("tier", "great"), "submissions[0].verdict.tier"),
    (lambda r: r["submissions"][1].__setitem__("index", 1), "submissions[1].index"),
    (lambda r: r["submissions"][2]["verdict"].pop("compiled"), "submissions[2].verdict.compiled"),
    (lambda r: r["config"].__setitem__("attempt_id", "someone/else"), "config.attempt_id"),
    (lambda r: r.__setitem__("status", "skipped"), "status"),
    (lambda r: r["llm_calls"][0]["usage"].__setitem__("prompt_tokens", [1]), "llm_calls[0].usage.prompt_tokens"),
])
def test_malformed_records_name_trial_and_field(planned, mutate, field) -> None:
    store, trials = planned
    outcome = make_outcome(trials[0])
    record = json.loads(outcome.record_json)
    mutate(record)
    with pytest.raises(RecordError) as err:
        store.write_outcomes([make_outcome(trials[1]), replace(outcome, record_json=json.dumps(record))])
    assert err.value.trial_id == trials[0].trial_id and err.value.field == field, str(err.value)
    assert store.done_ids() == set()


def test_outcome_level_errors(planned) -> None:
    store, trials = planned
    with pytest.raises(RecordError, match="record_json.*not a JSON"):
        store.write_outcomes([replace(make_outcome(trials[0]), record_json="{not json")])
    with pytest.raises(RecordError, match="record_json.*only an infra_error"):
        store.write_outcomes([replace(make_outcome(trials[0]), record_json=None)])
    with pytest.raises(RecordError, match="synthetic"):                   # a measured run refuses synthetic data
        store.write_outcomes([make_outcome(trials[0], synthetic=True)])
    with pytest.raises(RecordError, match="final_tier"):
        store.write_outcomes([replace(make_outcome(trials[0], tier="pass"), final_tier="pass2x")])
    with pytest.raises(StoreError, match="not in the plan"):
        store.write_outcomes([make_outcome(replace(trials[0], trial_id="x/unplanned"))])
    assert store.done_ids() == set()


def test_duplicate_writes(planned) -> None:
    store, trials = planned
    outcome = make_outcome(trials[0])
    store.write_outcomes([outcome])
    before = snapshot(store)
    store.write_outcomes([outcome])                                   # identical: a no-op
    store.write_outcomes([outcome, make_outcome(trials[1])])          # identical + new in one batch
    assert count(store, "SELECT COUNT(*) FROM submissions WHERE trial_id = ?", trials[0].trial_id) == 5
    with pytest.raises(OutcomeConflict, match=trials[0].trial_id):
        store.write_outcomes([make_outcome(trials[0], tier="fail"), make_outcome(trials[2])])
    with pytest.raises(OutcomeConflict, match="already done"):
        store.write_outcomes([replace(outcome, attempts=2)])
    with pytest.raises(OutcomeConflict, match="two different outcomes"):
        store.write_outcomes([make_outcome(trials[3]), make_outcome(trials[3], tier="fail")])
    def without_trial_1(snap: dict[str, list]) -> dict[str, list]:
        return {k: [r for r in v if r[0] != trials[1].trial_id] for k, v in snap.items()}

    assert without_trial_1(snapshot(store)) == without_trial_1(before)
    assert store.done_ids() == {trials[0].trial_id, trials[1].trial_id}


# -- durability ---------------------------------------------------------------------------------------------------
def test_reopen_keeps_everything(tmp_path: Path) -> None:
    trials = make_trials()
    with RunStore(tmp_path / "run") as store:
        store.set_meta(json.dumps({"models": [MODEL]}), "h" * 64, synthetic=False)
        record_plan(store, trials)
        store.write_outcomes([make_outcome(t, tier) for t, tier in zip(trials[:6], ("pass", "fail") * 3)])
        store.log_event("started", trials[6].trial_id, attempt=1)
        before = snapshot(store)
        with pytest.raises(StoreLocked, match=str(os.getpid())):    # a single writer
            RunStore(tmp_path / "run")
        with RunStore(tmp_path / "run", readonly=True) as reader:   # readers are fine meanwhile
            assert reader.done_ids() == {t.trial_id for t in trials[:6]}
            with pytest.raises(StoreError, match="readonly"):
                reader.log_event("started")
    with RunStore(tmp_path / "run") as store:
        assert store.connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert snapshot(store) == before
        meta = store.meta()
        assert meta["synthetic"] is False and meta["config_hash"] == "h" * 64 and meta["schema_version"] == 1
        assert json.loads(meta["config_json"]) == {"models": [MODEL]}
        assert [(e.kind, e.trial_id, e.data) for e in store.events()] == [
            ("started", trials[6].trial_id, {"attempt": 1})]
        with pytest.raises(StoreError, match="refusing to mix"):
            store.set_meta("{}", "h" * 64, synthetic=True)


WRITER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from mkb_ray.records import Trial, TrialOutcome
    from mkb_ray.campaign.reconcile import record_plan
    from mkb_ray.store import RunStore

    run_dir, template_path, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    template = json.loads(template_path.read_text())
    trials = [Trial(f"m/p/r{i}/solo_tirx", model="m", problem_id="mlp_norm/01_x", dsl="tirx", target="gpu",
                    arm="solo", kind="benchmark", replicate=i) for i in range(n)]
    with RunStore(run_dir) as store:
        record_plan(store, trials)
        for start in range(0, n, 50):
            batch = []
            for t in trials[start:start + 50]:
                record = dict(template, config=dict(template["config"], attempt_id=t.trial_id))
                kernel = f"# {t.trial_id}\\n".encode() * 200
                batch.append(TrialOutcome(t.trial_id, "completed", json.dumps(record),
                                          {"final_kernel.py": kernel, "SKILL.md": t.trial_id.encode() * 50,
                                           "transcript.jsonl": kernel * 5}, skill_md=t.trial_id))
            store.write_outcomes(batch)
            print(start + len(batch), flush=True)
""")


def run_writer_and_kill(run_dir: Path, template_path: Path, n: int, after: int) -> int:
    """Start the writer loop, let it commit at least `after` outcomes, then SIGKILL it (mid-batch, most likely).
    Returns the last count it reported committed."""
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(run_dir), str(template_path), str(n)],
                            stdout=subprocess.PIPE, text=True, cwd=REPO)
    committed = 0
    try:
        while committed < after:
            line = proc.stdout.readline()
            assert line, "the writer died before committing"
            committed = int(line)
        time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    return committed


def test_kill_9_mid_write_leaves_a_consistent_store(tmp_path: Path) -> None:
    trial = make_trials()[0]
    template = json.loads(make_outcome(trial, n_submissions=4, n_calls=6).record_json)
    template["final_kernel_path"] = None          # the writer hands over its own final kernel, not this one
    template_path = tmp_path / "record.json"
    template_path.write_text(json.dumps(template))
    run_dir = tmp_path / "run"
    n = 3_000
    committed = run_writer_and_kill(run_dir, template_path, n, after=150)
    # A second writer resumes: it re-sends every batch from the start (identical outcomes are no-ops) and is
    # killed in turn, further on.
    committed = max(committed, run_writer_and_kill(run_dir, template_path, n, after=committed + 150))
    with RunStore(run_dir) as store:               # opens (the dead writer's lock died with it)
        conn = store.connection
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        done = store.done_ids()
        assert committed <= len(done) < n and len(done) % 50 == 0   # whole batches only
        assert count(store, "SELECT COUNT(*) FROM trials") == n
        per_trial = dict(conn.execute("SELECT trial_id, COUNT(*) FROM submissions GROUP BY trial_id").fetchall())
        expected = len(template["submissions"]) + 1                 # + the final verdict row
        assert set(per_trial) == done and set(per_trial.values()) == {expected}
        assert count(store, "SELECT COUNT(*) FROM usage") == len(done) * len(template["llm_calls"])
        assert count(store, "SELECT COUNT(*) FROM skills") == len(done)
        rows = conn.execute("SELECT a.trial_id, a.sha256 FROM artifacts a").fetchall()
        assert len(rows) == 3 * len(done)
        assert all(store.artifacts.verify(sha) for _, sha in rows)
        assert all(store.artifacts.verify(r.record_sha) for r in store.trial_rows() if r.done)
        # the store keeps working after the crash: the next batch is accepted
        rest = sorted(r.trial_id for r in store.trial_rows() if not r.done)[:3]
        record = dict(template, config=dict(template["config"], attempt_id=None))
        store.write_outcomes([TrialOutcome(tid, "completed", json.dumps(record), {}) for tid in rest])
        assert len(store.done_ids()) == len(done) + 3


# -- stale trials -------------------------------------------------------------------------------------------------
def test_stale_trials_are_reported_not_overwritten(planned) -> None:
    store, trials = planned
    store.write_outcomes([make_outcome(t) for t in trials[:3]])
    edited = {trials[0].trial_id, trials[3].trial_id}                # one done, one still planned
    new_plan = [replace(t, problem_hash="q" * 64) if t.trial_id in edited else t for t in trials]
    old_row = store.trial(trials[0].trial_id)
    sync = record_plan(store, new_plan)
    assert sync.stale_ids == (trials[0].trial_id,)
    assert sync.refreshed_ids == (trials[3].trial_id,)
    assert set(sync.done_ids) == {trials[1].trial_id, trials[2].trial_id}
    assert store.trial(trials[0].trial_id) == old_row                # not overwritten
    assert store.trial(trials[3].trial_id).problem_hash == "q" * 64  # nothing was lost by refreshing it
    assert trials[0].trial_id in store.done_ids()

    with pytest.raises(StoreError, match="is not stale"):
        rerun_stale(store, sync, [trials[1].trial_id])
    reset = rerun_stale(store, sync, sync.stale_ids)
    # trials[2], the skill arm reading solo_cutedsl's SKILL.md, is done: reset with it (see the tests below).
    assert reset.stale_ids == (trials[0].trial_id,) and reset.dependant_ids == (trials[2].trial_id,)
    row = store.trial(trials[0].trial_id)
    assert (row.status, row.problem_hash, row.record_sha, row.final_tier, row.attempts) == (
        "planned", "q" * 64, None, None, 0)
    for table in ("submissions", "usage", "skills", "artifacts"):
        assert count(store, f"SELECT COUNT(*) FROM {table} WHERE trial_id = ?", trials[0].trial_id) == 0
    assert store.artifacts.has(old_row.record_sha)                   # artifact files are kept
    event = store.events("rerun_stale")[0]
    assert event.trial_id == trials[0].trial_id and event.data["old_hashes"]["problem"] == "p" * 64
    assert record_plan(store, new_plan).stale_ids == ()
    store.write_outcomes([make_outcome(replace(trials[0], problem_hash="q" * 64), tier="fail")])
    assert store.trial(trials[0].trial_id).final_tier == "fail"


def child_rows(store: RunStore, trial_id: str) -> dict[str, int]:
    return {table: count(store, f"SELECT COUNT(*) FROM {table} WHERE trial_id = ?", trial_id)
            for table in ("submissions", "usage", "skills", "artifacts")}


def test_rerun_stale_resets_the_finished_dependants_down_the_chain(planned) -> None:
    store, trials = planned
    by_id = {t.trial_id: t for t in trials}
    chain = f"{MODEL}/{PROBLEMS[0]}/chain0"
    a, b, c = (f"{chain}/h{k}" for k in range(3))
    other = f"{MODEL}/{PROBLEMS[1]}/chain0"                      # its h0 goes stale while its h1 is still planned
    unrelated = f"{MODEL}/{PROBLEMS[0]}/r0/solo_cutedsl"
    store.write_outcomes([make_outcome(by_id[t]) for t in (a, b, c, f"{other}/h0", unrelated)])
    before = {t: store.trial(t) for t in (a, b, c, unrelated)}
    unrelated_children = child_rows(store, unrelated)
    assert all(n > 0 for n in child_rows(store, c).values())

    stale = {a, f"{other}/h0"}
    new_plan = [replace(t, config_hash="d" * 64) if t.trial_id in stale else t for t in trials]
    sync = record_plan(store, new_plan)
    assert set(sync.stale_ids) == stale
    assert finished_dependants(store, sync, [a]) == (b, c)               # in plan order; h1 of `other` is not finished
    assert finished_dependants(store, sync, sync.stale_ids) == (b, c)

    reset = rerun_stale(store, sync, sync.stale_ids)
    assert set(reset.stale_ids) == stale and reset.dependant_ids == (b, c)
    for tid in (a, b, c):
        row = store.trial(tid)
        assert (row.status, row.record_sha, row.skill_sha, row.final_tier, row.attempts) == (
            "planned", None, None, None, 0), tid
        assert child_rows(store, tid) == {"submissions": 0, "usage": 0, "skills": 0, "artifacts": 0}, tid
        assert store.artifacts.has(before[tid].record_sha)         # artifact files are kept
    assert store.trial(a).config_hash == "d" * 64                 # the stale trial takes the plan's new hashes,
    assert store.trial(b).config_hash == store.trial(c).config_hash == "c" * 64   # its dependants keep their own
    assert store.trial(f"{other}/h1").status == "planned"
    assert store.trial(unrelated) == before[unrelated] and child_rows(store, unrelated) == unrelated_children

    assert {e.trial_id for e in store.events("rerun_stale")} == stale
    dependant_events = {e.trial_id: e.data for e in store.events("rerun_dependant")}
    assert dependant_events == {
        tid: {"stale_source": a, "superseded_skill_sha": before[a].skill_sha, "old_status": "completed",
              "old_record_sha": before[tid].record_sha} for tid in (b, c)}

    # Nothing is stale any more; the chain runs again on its new source (no conflict with the old outcomes).
    sync = record_plan(store, new_plan)
    assert sync.stale_ids == () and {a, b, c} <= set(sync.pending_ids)
    store.write_outcomes([make_outcome(replace(by_id[a], config_hash="d" * 64), tier="fail"),
                          make_outcome(by_id[b], tier="fail", skill="# SKILL\n- new\n"), make_outcome(by_id[c])])
    assert store.trial(b).final_tier == "fail" and store.skill_text(b) == "# SKILL\n- new\n"


def test_rerun_stale_leaves_upstream_and_unplanned_trials_alone(planned) -> None:
    store, trials = planned
    by_id = {t.trial_id: t for t in trials}
    chain = f"{MODEL}/{PROBLEMS[0]}/chain0"
    h0, h1, h2 = (f"{chain}/h{k}" for k in range(3))
    solo = f"{MODEL}/{PROBLEMS[1]}/r0/solo_tirx"
    dropped = f"{MODEL}/{PROBLEMS[1]}/r0/tirx2cutedsl_skill"      # reads solo's SKILL.md, but leaves the plan
    store.write_outcomes([make_outcome(by_id[t]) for t in (h0, h1, solo)]
                         + [make_outcome(by_id[h2], status="error", n_submissions=0)]   # finished all the same
                         + [make_outcome(by_id[dropped], status="skipped", n_submissions=0, n_calls=0, skill="")])
    kept = {t: store.trial(t) for t in (h0, dropped)}
    new_plan = [replace(t, problem_hash="q" * 64) if t.trial_id in (h1, solo) else t
                for t in trials if t.trial_id != dropped]
    sync = record_plan(store, new_plan)
    assert set(sync.stale_ids) == {h1, solo} and sync.unplanned_ids == (dropped,)

    reset = rerun_stale(store, sync, sync.stale_ids)
    assert reset.dependant_ids == (h2,)                           # a hop downstream; its source's source is not
    assert store.trial(h2).status == "planned" and store.trial(h1).status == "planned"
    assert store.trial(h0) == kept[h0] and store.trial(dropped) == kept[dropped]
    assert child_rows(store, dropped)["skills"] == 1
    assert [e.trial_id for e in store.events("rerun_dependant")] == [h2]
    assert store.events("rerun_dependant")[0].data["stale_source"] == h1
    assert store.events("rerun_dependant")[0].data["old_status"] == "error"


def test_a_stale_dependant_not_asked_for_is_reset_with_the_plans_hashes(planned) -> None:
    store, trials = planned
    by_id = {t.trial_id: t for t in trials}
    h0, h1, h2 = (f"{MODEL}/{PROBLEMS[0]}/chain0/h{k}" for k in range(3))
    store.write_outcomes([make_outcome(by_id[t]) for t in (h0, h1, h2)])
    new_plan = [replace(t, template_hash="u" * 64) if t.trial_id in (h0, h1) else t for t in trials]
    sync = record_plan(store, new_plan)
    assert sync.stale_ids == (h0, h1)
    reset = rerun_stale(store, sync, [h0])                               # h1 is below h0: it cannot stay done
    assert reset.stale_ids == (h0,) and reset.dependant_ids == (h1, h2)
    assert store.trial(h1).template_hash == "u" * 64 and store.trial(h2).template_hash == "t" * 64
    with pytest.raises(StoreError, match="is not stale"):   # reset already: nothing left to rerun
        rerun_stale(store, sync, [h1])
    assert record_plan(store, new_plan).stale_ids == () and record_plan(store, new_plan).refreshed_ids == ()


def test_events(planned) -> None:
    store, trials = planned
    store.log_event("started", trials[0].trial_id, attempt=1)
    store.log_event("retry", trials[0].trial_id, attempt=2, error="worker died")
    store.log_event("server_restart", model=MODEL, path=Path("/x"))
    assert [e.kind for e in store.events()] == ["started", "retry", "server_restart"]
    assert store.events("retry")[0].data == {"attempt": 2, "error": "worker died"}
    assert store.events("server_restart")[0].data == {"model": MODEL, "path": "/x"}
    assert store.events("server_restart")[0].trial_id is None
    with pytest.raises(ValueError, match="snake_case"):
        store.log_event("Started!")


def test_readonly_needs_an_existing_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no run store"):
        RunStore(tmp_path / "nothing", readonly=True)
    with RunStore(tmp_path / "run"):
        pass
    conn = sqlite3.connect(tmp_path / "run" / "store.sqlite")
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="schema_version 99"):
        RunStore(tmp_path / "run")
