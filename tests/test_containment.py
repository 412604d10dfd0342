"""The containment probe's parts (issue 29): the planted closure and its ground truth, and the detector that reads
texts (analysis/containment.py). End to end on a `mkb run` campaign: tests/test_report_causal.py."""
from __future__ import annotations

from mkb_ray.analysis.containment import PRESENT_SIMILARITY, presence
from mkb_ray.synthetic.plant import PLANTED_CLAIM_ID, descendants_by_hop, plant_into, planted_closure


def test_the_planted_closure_and_its_ground_truth():
    text = plant_into("# Notes (synthetic)\n\n- Use 128 threads.\n")
    assert text.endswith(planted_closure().text + "\n") and PLANTED_CLAIM_ID in text
    # A descendant keeps the planted id among its parents; a hop without one ends the line for good.
    child = text.replace(f"claim:{PLANTED_CLAIM_ID} parent:-", f"claim:h2.0 parent:{PLANTED_CLAIM_ID}")
    grandchild = text.replace(f"claim:{PLANTED_CLAIM_ID} parent:-", "claim:h3.0 parent:h2.0")
    assert descendants_by_hop([child, grandchild, "# none\n", grandchild]) == [True, True, False, False]


def test_presence_reads_paraphrases_not_other_claims(sentence_encoder):
    encoder = sentence_encoder
    planted = planted_closure().text
    kept = "- Eager PyTorch is already the best anyone could do for this fused operator; a custom kernel is wasted."
    other = "- Use 128 threads per block and keep the sums in fp32.\n- The tensor cores are idle here."
    assert presence([kept, other, ""], planted, encoder) == [True, False, False]
    assert 0.5 < PRESENT_SIMILARITY < 0.9
