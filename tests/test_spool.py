"""The pieces that let a cluster run's attempts outlive its driver, without Ray: outcomes a task leaves in the
run's spool (artifacts written straight into the run's artifact store), their ingestion into the store by the
next driver, the store's check that "already stored" artifacts really are on disk, and the autoscaler demand
signal. The cluster-level behaviour is tests/test_fake_cluster.py."""
from __future__ import annotations

import hashlib
import logging
from dataclasses import replace

import pytest

from mkb_ray.campaign.plan import Plan
from mkb_ray.campaign.reconcile import record_plan
from mkb_ray.campaign.spool import (OutcomeSpool, SpoolError, ingest_spool, offload_artifacts, share_run_dir,
                                   spool_key)
from mkb_ray.campaign.submit import DemandSignal
from mkb_ray.records import StoredArtifact
from mkb_ray.store import ArtifactStore, RecordError, RunStore

from test_store import make_outcome, make_trials


@pytest.fixture
def run(tmp_path):
    trials = make_trials(problems=("mlp_norm/01_fused_add_rmsnorm",), hops=2)
    with RunStore(tmp_path / "run") as store:
        record_plan(store, trials)
        share_run_dir(store.run_dir, None)   # what the driver of a cluster run does first
        yield store, Plan(trials), trials


def test_offloaded_artifacts_are_on_disk_and_the_outcome_names_them(tmp_path):
    trial = make_trials(problems=("mlp_norm/01_fused_add_rmsnorm",), hops=0)[0]
    outcome = make_outcome(trial)
    store = ArtifactStore(tmp_path / "artifacts")
    offloaded = offload_artifacts(outcome, store)
    assert set(offloaded.artifacts) == set(outcome.artifacts)
    for name, data in outcome.artifacts.items():
        ref = offloaded.artifacts[name]
        assert ref == StoredArtifact(hashlib.sha256(data).hexdigest(), len(data))
        assert store.get(ref.sha256) == data


def test_a_spooled_outcome_reads_back_equal_and_stores_like_the_original(run, tmp_path):
    store, plan, trials = run
    original = make_outcome(trials[0])
    spool = OutcomeSpool(store.run_dir)
    [spooled] = spool.write([original])
    [path] = spool.files()
    assert path.name == f"{spool_key([trials[0].trial_id])}.json"
    assert spool.read(path) == [spooled]
    assert all(isinstance(ref, StoredArtifact) for ref in spooled.artifacts.values())
    # The store takes the addresses as it would the bytes: same rows, same fingerprint as the original outcome.
    store.write_outcomes([spooled])
    store.write_outcomes([original])   # identical outcome: a no-op, not a conflict
    rows = store.connection.execute("SELECT name, sha256, bytes FROM artifacts WHERE trial_id = ? ORDER BY name",
                                    (trials[0].trial_id,)).fetchall()
    assert rows == sorted((n, hashlib.sha256(d).hexdigest(), len(d)) for n, d in original.artifacts.items())
    final = store.connection.execute("SELECT kernel_bytes FROM submissions WHERE trial_id = ? AND is_final = 1",
                                     (trials[0].trial_id,)).fetchone()[0]
    assert final == len(original.artifacts["final_kernel.py"])


def test_the_store_refuses_an_artifact_its_worker_claims_but_never_wrote(run):
    store, _, trials = run
    outcome = make_outcome(trials[0])
    ghost = dict(outcome.artifacts, **{"transcript.jsonl": StoredArtifact("ab" * 32, 10)})
    with pytest.raises(RecordError, match=r"artifacts.*not in"):
        store.write_outcomes([replace(outcome, artifacts=ghost)])
    assert store.done_ids() == set()
    with pytest.raises(RecordError, match="not a valid stored artifact"):
        store.write_outcomes([replace(outcome, artifacts={"x": StoredArtifact("nothex", 1)})])


def test_ingest_commits_what_finished_skips_the_rest_and_keeps_an_unreadable_file(run, caplog):
    store, plan, trials = run
    spool = OutcomeSpool(store.run_dir)
    finished, already, errored = trials[0], trials[1], trials[2]
    store.write_outcomes([make_outcome(already)])
    spool.write([make_outcome(finished)])
    spool.write([make_outcome(already)])
    spool.write([make_outcome(errored, status="error", n_submissions=0)])
    spool.root.joinpath("broken.json").write_text("{not json")
    spool.write([replace(make_outcome(trials[3]), trial_id="someone/else/r0/solo_tirx")])   # not in this plan
    with caplog.at_level(logging.ERROR):
        assert ingest_spool(spool, store, plan) == 1
    assert store.done_ids() == {finished.trial_id, already.trial_id}
    # An attempt error is re-run (its model server may have been down), so it is not kept.
    assert errored.trial_id not in store.done_ids()
    assert [p.name for p in spool.files()] == ["broken.json"]
    assert "broken.json" in caplog.text and "kept for inspection" in caplog.text
    with pytest.raises(SpoolError, match="broken.json"):
        spool.read(spool.root / "broken.json")
    assert [e.data["trials"] for e in store.events("spool_ingested")] == [1]
    # A second driver finds nothing left to collect.
    assert ingest_spool(spool, store, plan) == 0


def test_removing_a_committed_tasks_spool_file(run):
    store, _, trials = run
    spool = OutcomeSpool(store.run_dir)
    batch = [make_outcome(t) for t in trials[:2]]
    spool.write(batch)
    spool.remove([t.trial_id for t in trials[:2]])
    assert spool.files() == []
    spool.remove([t.trial_id for t in trials[:2]])   # idempotent


def test_demand_signal_sends_changes_at_most_once_per_interval_and_clears():
    sent = []
    signal = DemandSignal({"mkb_agent_cpu": 1.0}, min_interval_s=1.0,
                          request=lambda bundles: sent.append(bundles))
    signal.update(3, now=0.0)
    signal.update(3, now=5.0)     # unchanged: nothing sent
    signal.update(5, now=5.5)
    signal.update(6, now=5.9)     # within a second of the last request: held back
    signal.update(6, now=6.6)
    signal.clear()
    assert signal.sent == [3, 5, 6, 0]
    assert sent[0] == [{"mkb_agent_cpu": 1.0}] * 3 and sent[-1] == []


def test_a_node_that_does_not_see_the_run_directory_refuses_to_spool(tmp_path):
    trial = make_trials(problems=("mlp_norm/01_fused_add_rmsnorm",), hops=0)[0]
    elsewhere = OutcomeSpool(tmp_path / "not-shared")   # what a worker on another machine's local disk would see
    with pytest.raises(SpoolError, match="--shared-dir"):
        elsewhere.write([make_outcome(trial)])
    assert not (tmp_path / "not-shared" / "spool").exists()


def test_a_shared_dir_holds_artifacts_and_spool_while_the_store_stays_in_the_run_dir(tmp_path):
    trials = make_trials(problems=("mlp_norm/01_fused_add_rmsnorm",), hops=0)
    run_dir, shared_root = tmp_path / "local" / "run", tmp_path / "nfs"
    with RunStore(run_dir) as store:
        record_plan(store, trials)
        shared = share_run_dir(run_dir, shared_root)
        assert shared == (shared_root / "run").resolve()
        [spooled] = OutcomeSpool(shared).write([make_outcome(trials[0])])   # as a task on any node would
        store.write_outcomes([spooled])
        assert store.done_ids() == {trials[0].trial_id}
        assert (run_dir / "artifacts").is_symlink() and (run_dir / "spool").is_symlink()
        assert (run_dir / "store.sqlite").is_file() and not (shared / "store.sqlite").exists()
        sha = spooled.artifacts["SKILL.md"].sha256
        assert (shared / "artifacts" / sha[:2] / sha).is_file()
        assert share_run_dir(run_dir, shared_root) == shared   # a resumed run: the same links, accepted
        with pytest.raises(SpoolError, match="another --shared-dir"):
            share_run_dir(run_dir, tmp_path / "other")
    with RunStore(tmp_path / "plain") as store:
        record_plan(store, trials)
        store.write_outcomes([make_outcome(trials[0])])      # a run begun without --shared-dir
        with pytest.raises(SpoolError, match="without --shared-dir"):
            share_run_dir(store.run_dir, shared_root)
