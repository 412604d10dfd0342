"""`mkb report` on a run with intervention arms (issue 29): a small synthetic campaign (one model, 12 problems, two
replicates; a claim ablation, a placebo and the verification gate in mark mode; 5-hop chains with containment probes)
run by `mkb run` on a local Ray, then rendered. The index gets the causal section (the table, its planted column,
SYNTHETIC said), each row links to a list of its intervention trials and their controls, the table is written to
tables/, and an intervention trial's page shows the hand-off it read and links to its control. A run without
intervention trials has no such section."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from test_export import build_run

from mkb_ray.analysis.report.render import ReportOptions, render_report
from mkb_ray.analysis.report.trials import file_stem

REPO = Path(__file__).resolve().parents[1]
CONFIG = """
name: causal-report
description: "SYNTHETIC intervention arms for the report's causal table"
synthetic:
  seed: 29
  source_pass_shift: 0.35
  closure_harm_per_share: 0.0
  closure_harm_per_claim: 0.25
models: [glm-5.3-flash]
problems: {synthetic: 12}      # two per family: every placebo has a donor
replicates: 2
benchmark:
  arms: [solo_cutedsl, solo_tirx, cutedsl2tirx_skill, tirx2cutedsl_skill]
interventions:                 # no ablation by category: it would load the embedding model
  - kind: claim_ablation
    claims: 1
  - kind: placebo
  - kind: verification_gate
    mode: mark
  - kind: containment_probe    # one run for both: each `mkb run` starts a Ray
    gates: [none, remove, mark]
    within: 3
  - {kind: episodic, benchmark: false, chains: true}
chains: {hops: 5, baselines: 1}
target: gpu
"""
_ROW = re.compile(r"<tr><td>(?P<label>[^<]*)</td><td>(?P<model>[^<]*)</td>(?P<cells>.*?)</tr>", re.S)
_LINK = re.compile(r'href="(lists/causal-\d+\.html)"')
_TRIAL = re.compile(r'<a href="\.\./trials/[^"]+">([^<]+)</a>')


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("causal")
    config = root / "causal-report.yaml"
    config.write_text(CONFIG)
    done = subprocess.run([sys.executable, "-m", "mkb_ray.cli", "run", str(config), "--run-dir", str(root / "run"),
                           "--no-progress"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    render_report(root / "run", root / "out", ReportOptions(n_boot=200, lineage_n_boot=0))
    return root / "out"


def _causal_rows(out: Path) -> dict[tuple[str, str], str]:
    """(intervention, model) -> the row's markup, from the causal section of index.html."""
    index = (out / "index.html").read_text()
    section = index[index.index('<section id="causal">'):]
    section = section[:section.index("</section>")]
    table = section[section.index("<tbody>"):section.index("</tbody>")]
    return {(m["label"], m["model"]): m["cells"] for m in _ROW.finditer(table)}


@pytest.mark.ray
def test_the_index_shows_the_causal_table_with_its_planted_column(report: Path) -> None:
    index = (report / "index.html").read_text()
    assert "Which claims cause help or harm (intervention arms) (SYNTHETIC)</h2>" in index
    assert "Intervention arms against their controls (SYNTHETIC)" in index
    assert "<th>planted net</th><th>covered</th>" in index and "<th>identical (not run)</th>" in index
    rows = _causal_rows(report)
    labels = {label for label, _ in rows}
    assert {"placebo", "gate (mark)", "ablate claim 0"} <= labels, labels
    assert list(rows)[: len(labels)] == [(label, "all") for label in sorted(labels)]     # pooled rows first
    assert all(re.search(r"<td[^>]*>[✓✗–]</td>", cells) for cells in rows.values())
    frame = pl.read_parquet(report / "tables" / "causal.parquet")
    assert frame.height == len(rows) == pl.read_csv(report / "tables" / "causal.csv").height
    assert {"planted_net", "net_covered", "net_lo", "net_hi"} <= set(frame.columns)
    # 12 problems × 2 replicates × 2 skill arms
    assert frame.filter(pl.col("model") == "all")["n"].to_list() == [48, 48, 48]


@pytest.mark.ray
def test_each_row_lists_its_intervention_trials_and_their_controls(report: Path) -> None:
    cells = _causal_rows(report)["placebo", "all"]
    link = _LINK.search(cells)
    assert link is not None, cells
    listed = _TRIAL.findall((report / link.group(1)).read_text())
    placebos = [tid for tid in listed if tid.endswith("~placebo")]
    assert placebos and len(listed) == 2 * len(placebos)
    for tid in placebos:
        assert tid.removesuffix("~placebo") in listed


@pytest.mark.ray
def test_an_intervention_trial_page_shows_its_hand_off_and_its_control(report: Path) -> None:
    pages = [p.read_text() for p in sorted(report.glob("trials/*_gate-mark.html"))]
    assert len(pages) == 48
    for page in pages:
        control = re.search(r"<dt>intervention</dt><dd>gate \(mark\); control: <a href=\"([^\"]+)\">([^<]+)</a>", page)
        assert control is not None and control.group(1) == file_stem(control.group(2)) + ".html"
        assert (report / "trials" / control.group(1)).exists() and 'id="synthetic-banner"' in page
    heading = '<h2 id="hand-off">What this attempt read (intervention hand-off)</h2>\n<pre class="skill">'
    assert any(heading in page for page in pages)


def test_a_run_without_intervention_trials_has_no_causal_section(tmp_path: Path) -> None:
    build_run(tmp_path / "run")
    render_report(tmp_path / "run", tmp_path / "out", ReportOptions(n_boot=0, lineage_n_boot=0, trial_pages=False))
    assert 'id="causal"' not in (tmp_path / "out" / "index.html").read_text()
    assert not (tmp_path / "out" / "tables" / "causal.csv").exists()


@pytest.mark.ray
def test_the_shipped_run_recovers_what_it_plants(report: Path) -> None:
    """What `mkb run` stored scored against the generator's law (analysis/causal_calibration.py): every row's planted
    net inside its interval and of the right sign (bigger runs over seeds: benchmarks/causal_recovery.py). The planted
    values themselves: the mark changes nothing the law reads (0 exactly); a placebo and a cut first claim do."""
    from mkb_ray.analysis.calibration import run_spec
    from mkb_ray.analysis.causal import causal_table, intervention_pairs
    from mkb_ray.analysis.causal_calibration import causal_calibration
    from mkb_ray.analysis.cells import result_rows
    from mkb_ray.store import RunStore

    with RunStore(report.parent / "run", readonly=True) as store:
        spec = run_spec(store.meta())
        assert spec is not None
        pairs = intervention_pairs(result_rows(store))
        table = causal_calibration(store, pairs, spec, table=causal_table(pairs))
    assert table.height == 6
    assert table["net_covered"].all() and table["sign_right"].all(), table
    planted = dict(zip(table.filter(pl.col("model") == "all")["intervention"],
                       table.filter(pl.col("model") == "all")["planted_net"]))
    assert planted["gate (mark)"] == pytest.approx(0.0, abs=1e-12)
    assert abs(planted["placebo"]) > 1e-3 and abs(planted["ablate claim 0"]) > 1e-3


@pytest.mark.ray
def test_the_gate_contains_a_planted_closure_and_the_detector_agrees_with_the_truth(report: Path) -> None:
    """The containment probe end to end: without a gate the planted closure is mostly copied on (drop rate 0.1 a
    hop), behind the verification gate (remove) it is gone at hop 1, and the detector that reads the texts
    (analysis/containment.py) agrees with the generator's ground truth (later, a closure born anew that reads like
    the planted one may be taken for it)."""
    from mkb_ray.analysis.containment import containment_table, probe_chains, probe_settings
    from mkb_ray.claims.embeddings import shared_encoder
    from mkb_ray.store import RunStore

    with RunStore(report.parent / "run", readonly=True) as store:
        table = containment_table(probe_chains(store), probe_settings(store.meta()), shared_encoder(),
                                  synthetic=True)
    rows = {r["probe"]: r for r in table.iter_rows(named=True)}
    assert set(rows) == {"probe, no gate", "probe, gate (remove)", "probe, gate (mark)"}
    assert all(r["chains"] == 12 and r["within"] == 3 for r in rows.values())
    removed, bare, marked = rows["probe, gate (remove)"], rows["probe, no gate"], rows["probe, gate (mark)"]
    assert removed["contained"] == removed["true_contained"] == 1.0 and removed["present_by_hop"][:3] == [0.0] * 3
    assert bare["contained"] < 0.5 and bare["true_contained"] < 0.5 and marked["contained"] < 0.5
    # Where the detector and the truth differ, a chain wrote a closure of the same idea anew (about another
    # operator): similar enough to read as the planted one, not its descendant (docs/metrics.md).
    assert all(r["detector_agreement"] >= 0.85 for r in rows.values()), rows
    index = (report / "index.html").read_text()
    assert "Containment probe: a planted false closure along chains (SYNTHETIC)" in index
    assert (report / "tables" / "containment.csv").exists()


@pytest.mark.ray
def test_the_chains_section_compares_each_kind_of_chain_hop_by_hop(report: Path) -> None:
    """Plain chains, their episodic twins and the probe twins, each hop's help and harm (analysis.chains
    .kind_hop_table): 12 chains of each kind, hops 1 and 2 alone and 3-9 pooled (hops 3 and 4 here)."""
    frame = pl.read_csv(report / "tables" / "chain_kinds.csv")
    kinds = frame["chain_kind"].unique().sort().to_list()
    assert kinds == ["episodic", "plain", "probe", "probe-gate-mark", "probe-gate-remove"]
    plain = frame.filter(pl.col("chain_kind") == "plain")
    assert plain["hops"].cast(pl.Utf8).to_list() == ["0", "1", "2", "3-9"] and plain["n"].to_list() == [12, 12, 12, 24]
    # The plain chains' own per-hop table holds only them (12 a hop), not their twins.
    assert pl.read_csv(report / "tables" / "chain_hops.csv")["n"].to_list() == [12] * 5
    assert "Help and harm per hop, by kind of chain" in (report / "index.html").read_text()
