"""The analysis's 'faster' margins: measured noise per target and kernel-time class (analysis/noise_margins.py),
derived from recorded measurements by benchmarks/noise_margins.py."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mkb_ray.analysis.cells import Attempt, CellReplicate
from mkb_ray.analysis.noise_margins import (RECORDED, NoiseMarginsError, load_noise_margins,
                                            parse_noise_margins)
from mkb_ray.analysis.paired import PairingRules, outcome
from mkb_ray.synthetic.spec import JUDGE_NOISE_MARGIN, SyntheticSpec

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
TWO_CLASSES = {"statistic": "hand-made", "targets": {
    "gpu": {"source": "here", "classes": [{"min_ms": 0, "margin": 1.0, "kernels": 3},
                                          {"min_ms": 0.05, "margin": 0.5, "kernels": 9}]},
    "cpu": {"source": "here", "classes": [{"min_ms": 0, "margin": 0.3, "kernels": 2}]}}}


def test_a_pair_takes_the_margin_of_its_noisier_class():
    margins = parse_noise_margins(TWO_CLASSES, "test")
    assert margins.margin("gpu", 0.2, 0.1) == 0.5          # both at or above 50 µs
    assert margins.margin("gpu", 0.2, 0.04) == 1.0         # one below: the pair is as noisy as that side
    assert margins.margin("gpu", 0.05) == 0.5              # a class starts at its bound
    assert margins.margin("gpu", None, 0.2) == 1.0         # a time not known: the target's largest
    assert margins.margin("tpu", 0.2) == 1.0               # a target never measured: the largest recorded


@pytest.mark.parametrize("broken, field", [
    ({"targets": {}}, "targets"),
    ({"targets": {"gpu": {"classes": [{"min_ms": 0.01, "margin": 0.5, "kernels": 1}]}}},
     "targets.gpu.classes[0].min_ms"),
    ({"targets": {"gpu": {"classes": [{"min_ms": 0, "margin": 0.5, "kernels": 1},
                                      {"min_ms": 0, "margin": 0.2, "kernels": 1}]}}}, "targets.gpu.classes[1]"),
    ({"targets": {"gpu": {"classes": [{"min_ms": 0, "margin": "wide", "kernels": 1}]}}}, "targets.gpu.classes[0]"),
    ({"targets": {"gpu": {"classes": [{"min_ms": 0, "margin": -0.1, "kernels": 1}]}}}, "targets.gpu.classes[0]"),
])
def test_a_broken_margins_file_names_the_file_and_field(broken, field):
    with pytest.raises(NoiseMarginsError) as caught:
        parse_noise_margins(broken, "margins.json")
    assert str(caught.value).startswith(f"margins.json: {field}:")


def test_an_unreadable_margins_file_is_named(tmp_path):
    path = tmp_path / "noise_margins.json"
    path.write_text("{not json")
    with pytest.raises(NoiseMarginsError, match=str(path)):
        load_noise_margins(path)


def test_the_paired_outcome_reads_the_margin_of_the_target_and_both_times():
    margins = parse_noise_margins(TWO_CLASSES, "test")
    rules = PairingRules(margins=margins)

    def cell(base_ms: float, skill_ms: float, target: str = "gpu", synthetic: bool = False) -> CellReplicate:
        def attempt(ms: float) -> Attempt:
            return Attempt(f"t{ms}", "completed", "pass", kernel_ms=ms, eager_ms=1.0, synthetic=synthetic)
        return CellReplicate("m", target, "mlp_norm/p", "mlp_norm", "tirx2cutedsl", 0, attempt(base_ms),
                             attempt(base_ms), attempt(skill_ms))

    assert outcome(cell(0.32, 0.2), rules) == "help"           # 1.6x, beyond the >= 50 µs class's 0.5
    assert outcome(cell(0.032, 0.02), rules) == "neutral"      # 1.6x, within the < 50 µs class's 1.0
    assert outcome(cell(0.2, 0.32), rules) == "harm"
    assert outcome(cell(0.2, 0.25, target="cpu"), rules) == "neutral"   # 1.25x within the CPU's 0.3
    assert outcome(cell(0.2, 0.27, target="cpu"), rules) == "harm"
    # Synthetic attempts take the GPU judge's widest margin whatever their times and target: the synthetic judge
    # stands in for it.
    assert rules.margin_of(cell(0.32, 0.2, synthetic=True)) == 1.0
    assert rules.margin_of(cell(0.2, 0.27, target="cpu", synthetic=True)) == 1.0
    assert outcome(cell(0.32, 0.2, synthetic=True), rules) == "neutral"
    assert outcome(cell(0.32, 0.15, synthetic=True), rules) == "help"       # 2.13x, beyond 1 + 1.0
    assert PairingRules(noise=0.05, margins=margins).margin_of(cell(0.032, 0.02)) == 0.05


def test_the_derivation_takes_the_upper_quartile_of_each_class(tmp_path):
    table = tmp_path / "fidelity.txt"
    header = "problem dsl judge_k_ms in-proc ratio judge_e_ms in-proc ratio speedup p95j p95ip goal wall evals pass"
    lines = ["## Run 1: not this one", header,
             "a/1 tirx 0.2 0.1 2.0 1.0 1.0 1.0 5.0/6.0 90.0% 1.0% NO 0.3 2.0 10/10",
             "## Run 2: this one,", "## over two header lines", header]
    for index, (ms, p95) in enumerate([(0.02, 80.0), (0.03, 40.0), (0.1, 10.0), (0.2, 20.0), (0.3, 30.0),
                                       (0.4, 50.0), (0.5, 60.0)]):
        lines.append(f"p/{index} cutedsl {ms} 0.1 2.0 1.0 1.0 1.0 5.0/6.0 {p95}% 1.0% NO 0.3 2.0 10/10")
    lines += ["## Probe", "p/9 tirx 9.9 0.1 2.0 1.0 1.0 1.0 5.0/6.0 99.0% 1.0% NO 0.3 2.0 10/10"]
    table.write_text("\n".join(lines) + "\n")
    out = tmp_path / "margins.json"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "noise_margins.py"), "--fidelity-table",
                           str(table), "Run 2", "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    gpu = load_noise_margins(out).targets["gpu"]
    # Below 50 µs: 0.4 and 0.8 -> q75 = 0.4 + 0.75 * 0.4 = 0.7; above: 0.1 .. 0.6 (five) -> q75 = 0.5.
    assert [(c.min_ms, c.margin, c.kernels) for c in gpu.classes] == [(0.0, 0.7, 2), (0.05, 0.5, 5)]


def test_rows_at_the_wall_floor_are_left_out_and_the_led_layout_parses(tmp_path):
    """The table with in-process `events` columns: the judge's pair-p95 is the first percentage, its net wall the
    field after yes/NO. A row whose judged time is exactly the floor share of that wall measured the wall clock."""
    header = ("problem dsl judge_k_ms in-proc ratio events judge_e_ms in-proc ratio events speedup p95j p95ip p95ev "
              "goal wall evals pass ref")
    rows = ["a/1 tirx 0.03274 0.0143 2.29 0.08 0.11 0.12 0.98 0.21 3.60/8.38 88.8% 1.1% 8.1% NO 0.3274 4.59 10/10 led",
            "b/1 tirx 0.04544 0.041 1.10 0.05 0.39 0.37 1.05 0.38 8.80/9.20 17.1% 1.2% 1.0% NO 0.3106 5.36 10/10 led",
            "c/1 cutedsl 0.1387 0.126 1.09 0.2 0.51 0.46 1.11 0.51 3.70/3.63 4.6% 0.3% 1.2% NO 0.4875 3.86 10/10 led"]
    table = tmp_path / "fidelity.txt"
    table.write_text("\n".join(["## Led run", header, *rows]) + "\n")
    out = tmp_path / "margins.json"
    base = [sys.executable, str(REPO / "benchmarks" / "noise_margins.py"), "--fidelity-table", str(table), "Led run"]
    done = subprocess.run(base + ["--wall-floor", "0.1", "--out", str(out)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    gpu = load_noise_margins(out).targets["gpu"]
    assert [(c.min_ms, c.margin, c.kernels) for c in gpu.classes] == [(0.0, 0.171, 1), (0.05, 0.046, 1)]
    assert gpu.source.endswith("[rows at the 0.1 wall floor left out]")
    done = subprocess.run(base + ["--out", str(out)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr  # without the option the floored row counts
    assert load_noise_margins(out).targets["gpu"].classes[0].kernels == 2


def test_the_recorded_margins_are_what_the_recorded_measurements_give(tmp_path):
    """analysis/noise_margins.json is regenerated from the files it names, not typed in."""
    recorded = json.loads(RECORDED.read_text())
    out = tmp_path / "margins.json"
    command = [sys.executable, str(REPO / "benchmarks" / "noise_margins.py"), "--out", str(out)]
    gpu_source = recorded["targets"]["gpu"]["source"].removeprefix("benchmarks/results/: ")
    gpu_source, _, left_out = gpu_source.partition(" [rows at the ")
    name, section = gpu_source.split(" (", 1)
    command += ["--fidelity-table", str(RESULTS / name), section.rstrip(")")]
    if left_out:  # "0.1 wall floor left out]"
        command += ["--wall-floor", left_out.split()[0]]
    cpu_sources = recorded["targets"]["cpu"]["source"].removeprefix("benchmarks/results/: ").split(", ")
    command += ["--noise-json", *(str(RESULTS / n) for n in cpu_sources)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text()) == recorded
    loaded = load_noise_margins()
    assert set(loaded.targets) == {"cpu", "gpu"}
    assert all(c.margin > 0 for t in loaded.targets.values() for c in t.classes)


def test_the_synthetic_judge_reads_with_the_recorded_gpu_margin():
    """The synthetic judge's default reading noise reproduces the GPU judge's measured margin, the one the analysis
    compares synthetic attempts at; re-measuring the judge (benchmarks/noise_margins.py) means changing
    JUDGE_NOISE_MARGIN in mkb_ray/synthetic/spec.py too."""
    recorded = load_noise_margins(RECORDED).margin("gpu")
    assert SyntheticSpec().judge_noise_margin == JUDGE_NOISE_MARGIN == recorded
    assert PairingRules().margin("gpu", True) == recorded
