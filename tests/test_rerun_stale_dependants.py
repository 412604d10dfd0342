"""`mkb run --rerun-stale` re-runs the finished dependants of a stale trial too: they read its SKILL.md, which the
rerun replaces, so after it no stored trial may be conditioned on a superseded SKILL.md.

A synthetic campaign (deterministic draws, local Ray on 127.0.0.1) of TIRx-started chains h0 → h1 → h2. Moving
`target` from gpu to cpu changes the attempt config of the TIRx hops only (CuTe DSL is always posed for the GPU):
h0 and h2 go stale, h1 (CuTe DSL) keeps its hashes but read h0's SKILL.md — the dependant under test."""
from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import pytest
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MKB = [sys.executable, "-m", "mkb_ray.cli"]


def _config(tmp_path: Path, target: str) -> Path:
    path = tmp_path / f"chains-{target}.yaml"
    path.write_text(f"""
name: rerun-dependants
models: [smollm2]
synthetic: {{seed: 1}}
problems: {{synthetic: 2}}
chains: {{hops: 3, start_dsl: tirx, baselines: 0}}
target: {target}
""")
    return path


def _run(config: Path, run_dir: Path, *extra: str) -> str:
    result = subprocess.run([*MKB, "run", str(config), "--run-dir", str(run_dir), "--no-progress", *extra],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return " ".join(result.stdout.split())  # rich wraps long lines at 160 columns


def _trials(run_dir: Path) -> dict[str, dict]:
    with sqlite3.connect(f"file:{run_dir / 'store.sqlite'}?mode=ro", uri=True) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("SELECT t.*, s.sha256 AS skill_row_sha FROM trials t "
                            "LEFT JOIN skills s USING (trial_id)").fetchall()
    return {row["trial_id"]: dict(row) for row in rows}


def _events(run_dir: Path, kind: str) -> dict[str, dict]:
    with sqlite3.connect(f"file:{run_dir / 'store.sqlite'}?mode=ro", uri=True) as conn:
        return {tid: json.loads(data) for tid, data in conn.execute(
            "SELECT trial_id, data FROM events WHERE kind = ?", (kind,))}


def _conditioned_on_old_skill(run_dir: Path) -> set[str]:
    """Skill trials whose record names a source SKILL.md other than the one their source has stored now."""
    from mkb_ray.store import RunStore

    out = set()
    with RunStore(run_dir, readonly=True) as store:
        for row in store.trial_rows():
            if row.skill_from is None or not row.done:
                continue
            read = json.loads(store.record_json(row.trial_id))["skill_source_sha256"]
            # The synthetic agent hashes the source text it was given, stripped.
            current = hashlib.sha256((store.skill_text(row.skill_from) or "").strip().encode()).hexdigest()
            if read != current:
                out.add(row.trial_id)
    return out


@pytest.mark.ray
def test_rerun_stale_reruns_the_finished_dependants_of_a_stale_chain_hop(tmp_path):
    run_dir = tmp_path / "run"
    _run(_config(tmp_path, "gpu"), run_dir)
    before = _trials(run_dir)
    hops = {k: sorted(t for t in before if t.endswith(f"/h{k}")) for k in range(3)}
    assert len(hops[0]) == len(hops[1]) == len(hops[2]) == 2
    assert all(row["status"] == "completed" for row in before.values())

    # Without --rerun-stale: the warning counts the dependants too, and the store is kept as it was.
    changed = _config(tmp_path, "cpu")
    out = _run(changed, run_dir)
    assert ("4 stored trial(s) are stale (their problem, templates or attempt config changed) and 2 finished "
            "trial(s) depend on them") in out
    assert "--rerun-stale re-runs both" in out and "0 to run" in out
    assert _trials(run_dir) == before

    out = _run(changed, run_dir, "--rerun-stale")
    assert "re-running 4 stale trial(s) and 2 finished dependant(s)" in out
    assert "6 trials, 0 already stored, 6 to run" in out
    after = _trials(run_dir)
    assert all(row["status"] == "completed" for row in after.values())
    assert _events(run_dir, "rerun_stale").keys() == set(hops[0] + hops[2])
    # Each h1 was reset once, as a dependant of its chain's h0, naming the SKILL.md it had read.
    dependant_events = _events(run_dir, "rerun_dependant")
    assert dependant_events.keys() == set(hops[1])
    for h0, h1 in zip(hops[0], hops[1]):
        assert dependant_events[h1]["stale_source"] == h0
        assert dependant_events[h1]["superseded_skill_sha"] == before[h0]["skill_sha"]
        assert dependant_events[h1]["old_record_sha"] == before[h1]["record_sha"]
        # A dependant keeps its own plan hashes (its attempt config did not change).
        assert after[h1]["config_hash"] == before[h1]["config_hash"] != after[h0]["config_hash"]

    # Where the rerun gave h0 a different SKILL.md, h1 ran again on it: new record, new SKILL.md row.
    moved = [(h0, h1) for h0, h1 in zip(hops[0], hops[1]) if after[h0]["skill_sha"] != before[h0]["skill_sha"]]
    assert moved, "no h0 wrote a different SKILL.md after the change: pick another seed"
    for _, h1 in moved:
        assert after[h1]["record_sha"] != before[h1]["record_sha"]
        assert after[h1]["skill_row_sha"] == after[h1]["skill_sha"] != before[h1]["skill_sha"]
    assert _conditioned_on_old_skill(run_dir) == set()

    # Rerun once more: nothing is stale, nothing runs.
    out = _run(changed, run_dir)
    assert "are stale" not in out and "6 already stored, 0 to run" in out
