"""The containment probe (issue 29) end to end on a small synthetic campaign run by `mkb run`: probe chains plant a
false closure into hop 1; without a gate it mostly survives, behind the verification gate (remove) it is gone at
once, and the detector that reads texts (analysis/containment.py) agrees with the generator's ground truth."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mkb_ray.analysis.containment import PRESENT_SIMILARITY, containment_table, presence, probe_chains, \
    probe_settings
from mkb_ray.analysis.report.render import ReportOptions, render_report
from mkb_ray.claims.embeddings import shared_encoder
from mkb_ray.store import RunStore
from mkb_ray.synthetic.plant import PLANTED_CLAIM_ID, descendants_by_hop, plant_into, planted_closure

REPO = Path(__file__).resolve().parents[1]
CONFIG = """
name: probe
synthetic: {seed: 5, closure_harm_per_share: 0.0, closure_harm_per_claim: 0.3}
models: [glm-5.3-flash]
problems: {synthetic: 12}
chains: {hops: 5, baselines: 1}
interventions:
  - {kind: containment_probe, gates: [none, remove, mark], within: 3}
target: gpu
"""


def test_the_planted_closure_and_its_ground_truth():
    text = plant_into("# Notes (synthetic)\n\n- Use 128 threads.\n")
    assert text.endswith(planted_closure().text + "\n") and PLANTED_CLAIM_ID in text
    # A descendant keeps the planted id among its parents; a hop without one ends the line for good.
    child = text.replace(f"claim:{PLANTED_CLAIM_ID} parent:-", f"claim:h2.0 parent:{PLANTED_CLAIM_ID}")
    grandchild = text.replace(f"claim:{PLANTED_CLAIM_ID} parent:-", "claim:h3.0 parent:h2.0")
    assert descendants_by_hop([child, grandchild, "# none\n", grandchild]) == [True, True, False, False]


def test_presence_reads_paraphrases_not_other_claims():
    encoder = shared_encoder()
    planted = planted_closure().text
    kept = "- Eager PyTorch is already the best anyone could do for this fused operator; a custom kernel is wasted."
    other = "- Use 128 threads per block and keep the sums in fp32.\n- The tensor cores are idle here."
    assert presence([kept, other, ""], planted, encoder) == [True, False, False]
    assert 0.5 < PRESENT_SIMILARITY < 0.9


@pytest.mark.ray
def test_the_gate_contains_a_planted_closure_and_the_detector_agrees_with_the_truth(tmp_path):
    config = tmp_path / "probe.yaml"
    config.write_text(CONFIG)
    run = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "mkb_ray.cli", "run", str(config), "--run-dir", str(run),
                           "--no-progress"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    with RunStore(run, readonly=True) as store:
        chains = probe_chains(store)
        table = containment_table(chains, probe_settings(store.meta()), shared_encoder(), synthetic=True)
    rows = {r["probe"]: r for r in table.iter_rows(named=True)}
    assert set(rows) == {"probe, no gate", "probe, gate (remove)", "probe, gate (mark)"}
    assert all(r["chains"] == 12 and r["within"] == 3 for r in rows.values())
    removed, bare, marked = rows["probe, gate (remove)"], rows["probe, no gate"], rows["probe, gate (mark)"]
    assert removed["contained"] == removed["true_contained"] == 1.0
    assert removed["present_by_hop"] == [0.0] * 4
    # Without a gate the claim is copied on (drop rate 0.1 a hop): most chains still hold it at hop 3.
    assert bare["contained"] < 0.5 and bare["true_contained"] < 0.5 and marked["contained"] < 0.5
    assert all(r["detector_agreement"] >= 0.9 for r in rows.values())
    out = tmp_path / "report"
    render_report(run, out, ReportOptions(n_boot=100, lineage_n_boot=0, trial_pages=False))
    index = (out / "index.html").read_text()
    assert "Containment probe: a planted false closure along chains (SYNTHETIC)" in index
    assert (out / "tables" / "containment.csv").exists()
