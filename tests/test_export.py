"""Exports of the run store: parquet tables match the store row for row, and results.json (MetaKernelBench's
format plus our `attempts`) holds every done trial once with the stored tier."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import polars as pl
import pytest

from mkb_ray.analysis.results_json import export_results_json
from mkb_ray.campaign.reconcile import record_plan
from mkb_ray.store import RunStore, export_parquet
from mkb_ray.cli.export import add_arguments as add_export_arguments, run as export_from_args
from test_store import MODEL, PROBLEMS, make_outcome, make_trials

OTHER = "glm-5.3"


def build_run(run_dir: Path, synthetic: bool = False) -> dict[str, str]:
    """Two models; every status; one trial left planned. Returns {trial_id: tier or status} of the done ones."""
    trials = make_trials() + make_trials(model=OTHER, problems=PROBLEMS[:1], hops=0)
    by_id = {t.trial_id: t for t in trials}
    p0 = f"{MODEL}/{PROBLEMS[0]}/r0"
    p1 = f"{MODEL}/{PROBLEMS[1]}/r0"
    plan = {
        f"{p0}/solo_cutedsl": ("completed", "pass"), f"{p0}/solo_tirx": ("completed", "fail"),
        f"{p0}/cutedsl2tirx_skill": ("completed", "pass2x"), f"{p0}/tirx2cutedsl_skill": ("completed", "fail"),
        f"{p1}/solo_cutedsl": ("completed", "pass2x"), f"{p1}/solo_tirx": ("infra_error", None),
        f"{p1}/cutedsl2tirx_skill": ("skipped", None),                 # p1/tirx2cutedsl_skill stays planned
        f"{MODEL}/{PROBLEMS[0]}/chain0/h0": ("completed", "pass"),
        f"{MODEL}/{PROBLEMS[0]}/chain0/h1": ("error", None),
        f"{OTHER}/{PROBLEMS[0]}/r0/solo_cutedsl": ("completed", "pass"),
        f"{OTHER}/{PROBLEMS[0]}/r0/solo_tirx": ("completed", "pass2x"),
    }
    with RunStore(run_dir) as store:
        store.set_meta(json.dumps({"name": "export-test"}), "e" * 64, synthetic=synthetic)
        record_plan(store, trials)
        outcomes = []
        for tid, (status, tier) in plan.items():
            kwargs = {"n_submissions": 0, "n_calls": 0} if status in ("skipped", "error") else {}
            outcomes.append(make_outcome(by_id[tid], tier=tier or "fail", status=status, synthetic=synthetic,
                                         **kwargs))
        store.write_outcomes(outcomes)
        store.log_event("started", f"{p1}/tirx2cutedsl_skill", attempt=1)
        store.log_event("server_restart", model=MODEL)
    return {tid: tier or status for tid, (status, tier) in plan.items()}


@pytest.mark.parametrize("synthetic", [False, True])
def test_parquet_tables_match_the_store(tmp_path: Path, synthetic: bool) -> None:
    run = tmp_path / "run"
    build_run(run, synthetic=synthetic)
    paths = export_parquet(run, tmp_path / "out")
    assert set(paths) == {"trials", "submissions", "usage", "skills", "artifacts", "events", "meta"}
    with RunStore(run, readonly=True) as store:
        conn = store.connection
        for table in ("trials", "submissions", "usage", "skills", "artifacts", "events"):
            frame = pl.read_parquet(paths[table])
            assert frame.height == conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0], table
            assert frame.height > 0, table
            assert frame.schema["synthetic"] == pl.Boolean, table
            assert frame["synthetic"].to_list() == [synthetic] * frame.height, table
        trials = pl.read_parquet(paths["trials"])
        stored = dict(conn.execute("SELECT trial_id, status FROM trials").fetchall())
        assert dict(zip(trials["trial_id"], trials["status"])) == stored
        skill = trials.filter(pl.col("trial_id") == f"{MODEL}/{PROBLEMS[0]}/r0/cutedsl2tirx_skill")
        assert skill["depends_on"].to_list() == [[f"{MODEL}/{PROBLEMS[0]}/r0/solo_cutedsl"]]
        subs = pl.read_parquet(paths["submissions"])
        assert subs.schema["correct"] == pl.Boolean and subs.schema["speedup"] == pl.Float64
        finals = subs.filter(pl.col("is_final"))
        assert dict(zip(finals["trial_id"], finals["tier"])) == dict(conn.execute(
            "SELECT trial_id, final_tier FROM trials WHERE final_tier IS NOT NULL").fetchall())
        usage = pl.read_parquet(paths["usage"])
        assert usage["prompt_tokens"].sum() == conn.execute("SELECT SUM(prompt_tokens) FROM usage").fetchone()[0]
    assert json.loads(paths["meta"].read_text())["synthetic"] is synthetic


def test_results_json_matches_the_store(tmp_path: Path) -> None:
    run = tmp_path / "run"
    done = build_run(run)
    paths = export_results_json(run, tmp_path / "out")
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in paths) == [
        f"{OTHER}/results.json", f"{MODEL}/results.json"]
    with RunStore(run, readonly=True) as store:
        stored = {r.trial_id: r for r in store.trial_rows()}
    seen: list[str] = []
    for path in paths:
        data = json.loads(path.read_text())
        assert {"legend", "model", "harbor_version", "overall", "cells"} <= set(data)  # MKB's top level
        assert data["synthetic"] is False and data["schema"] == "mkb-ray/results-json/1"
        for attempt in data["attempts"]:
            row = stored[attempt["trial_id"]]
            assert row.model == data["roster_model"] and row.done
            assert attempt["tier"] == row.final_tier and attempt["status"] == row.status
            seen.append(attempt["trial_id"])
    assert sorted(seen) == sorted(done)                     # every done trial exactly once
    assert sorted(seen) == sorted(t for t, r in stored.items() if r.done)

    ours = json.loads((tmp_path / "out" / MODEL / "results.json").read_text())
    cells = {(c["cell"]["problem"], c["cell"]["direction"]): c for c in ours["cells"]}
    assert set(cells) == {(p.split("/")[1], d) for p in PROBLEMS for d in ("cutedsl2tirx", "tirx2cutedsl")}
    cell = cells["01_fused_add_rmsnorm", "cutedsl2tirx"]
    assert cell["cell"] == {"problem": "01_fused_add_rmsnorm", "category": "mlp_norm", "direction": "cutedsl2tirx",
                            "source_task": "01_fused_add_rmsnorm_cutedsl", "target_task": "01_fused_add_rmsnorm_tirx"}
    rep = cell["replicates"][0]
    assert rep["resolved"] and rep["n_replicate"] == 1                   # 1-based, as in MKB
    assert rep["source"]["rewards"] == {"imported": 1.0, "correct": 1.0, "speedup_vs_eager": 1.2, "passed": 1.0}
    assert rep["base"]["rewards"]["passed"] == 0.0 and rep["skill"]["rewards"]["speedup_vs_eager"] == 2.5
    assert rep["source"]["usage"]["n_input_tokens"] == stored[f"{MODEL}/{PROBLEMS[0]}/r0/solo_cutedsl"].prompt_tokens
    # base failed, skill passed at 2.5x: every rung of the ladder up to 2 lifts by 1
    assert cell["base"]["R@0"] == 0.0 and cell["skill"]["R@2"] == 1.0 and cell["skill"]["R@4"] == 0.0
    assert cell["lift"]["S"] == pytest.approx(80.0)
    assert cell["by_source_verdict"]["passed"]["lift"]["R@0"] == 1.0
    other = cells["attention/01_gqa_paged_decode".split("/")[1], "tirx2cutedsl"]
    assert other["n_resolved"] == 0                          # source is an infra_error, skill never ran
    assert other["replicates"][0]["source"]["error"] == "RayTaskError: worker died"
    assert other["replicates"][0]["skill"] is None
    skipped = cells["01_gqa_paged_decode", "cutedsl2tirx"]["replicates"][0]["skill"]
    assert skipped["skipped"] == "the source wrote no SKILL.md" and skipped["rewards"] == {}
    assert ours["overall"]["n_cells"] == 4 and set(ours["overall"]["by_category"]) == {"mlp_norm", "attention"}
    assert ours["summary"]["solo_cutedsl"] == {"n": 2, "n_scored": 2, "pass_rate": 1.0, "pass2x_rate": 0.5}
    assert ours["summary"]["chain_hop:solo"]["n"] == 1
    hop = next(a for a in ours["attempts"] if a["trial_id"].endswith("chain0/h0"))
    assert (hop["kind"], hop["chain"], hop["hop"], hop["tier"], hop["correct"]) == ("chain_hop", 0, 0, "pass", True)


def test_export_cli(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    build_run(run, synthetic=True)
    parser = argparse.ArgumentParser()
    add_export_arguments(parser)
    assert export_from_args(parser.parse_args([str(run)])) == 0                    # both formats by default
    out = run / "export"
    assert (out / "trials.parquet").is_file() and (out / MODEL / "results.json").is_file()
    assert json.loads((out / MODEL / "results.json").read_text())["synthetic"] is True
    assert export_from_args(parser.parse_args([str(run), "--results-json", "--out", str(tmp_path / "o")])) == 0
    assert (tmp_path / "o" / OTHER / "results.json").is_file() and not (tmp_path / "o" / "trials.parquet").exists()
    assert export_from_args(parser.parse_args([str(tmp_path / "missing")])) == 2
    assert "no run store" in capsys.readouterr().err
