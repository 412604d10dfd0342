"""The problem registry: the shipped suite loads; malformed problems are reported by path and field."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from mkb_ray.cli import main
from mkb_ray.problems import FAMILIES, load_problems

from conftest import REPO


def test_shipped_suite_has_two_problems_per_family_with_all_solutions(problems):
    assert not problems.errors, problems.errors
    by_family = {f: [p for p in problems.problems if p.family == f] for f in FAMILIES}
    assert all(len(ps) >= 2 for ps in by_family.values()), {f: len(ps) for f, ps in by_family.items()}
    for problem in problems.problems:
        assert set(problem.solutions) == {"cutedsl", "tirx", "tirx_cpu"}, problem.problem_id
        assert problem.description and "\n" not in problem.description
        assert problem.sidecar.smoke, f"{problem.problem_id} has no smoke preset"


def _copy_example(root: Path) -> Path:
    family = root / "mlp_norm"
    family.mkdir(parents=True)
    for suffix in (".py", ".toml"):
        shutil.copy(REPO / "problems" / "mlp_norm" / f"01_fused_add_rmsnorm{suffix}", family / f"01_ok{suffix}")
    return family


def test_malformed_problems_are_reported_and_the_rest_load(tmp_path):
    family = _copy_example(tmp_path)
    (family / "02_no_reference.py").write_text('"""Missing reference."""\ndef make_inputs():\n    return []\n')
    (family / "03_bad_syntax.py").write_text('"""Broken."""\ndef reference(:\n')
    (family / "04_typo.py").write_text((family / "01_ok.py").read_text())
    (family / "04_typo.toml").write_text('family = "mlp_norm"\noutlier_scael = 2.0\n')
    (family / "05_bad_family.py").write_text((family / "01_ok.py").read_text())
    (family / "05_bad_family.toml").write_text('family = "convolution"\n')
    result = load_problems(tmp_path)
    assert [p.problem_id for p in result.problems] == ["mlp_norm/01_ok"]
    errors = {Path(e.path).name: e.message for e in result.errors}
    assert "reference()" in errors["02_no_reference.py"]
    assert "syntax error at line 2" in errors["03_bad_syntax.py"]
    assert "04_typo.toml" in errors["04_typo.py"] and "outlier_scael" in errors["04_typo.py"]
    assert "05_bad_family.toml" in errors["05_bad_family.py"] and "family" in errors["05_bad_family.py"]


def test_a_metakernelbench_root_without_sidecars_loads(tmp_path):
    family = tmp_path / "attention"
    family.mkdir()
    (family / "01_plain.py").write_text('"""Plain MKB problem."""\ndef reference(x):\n    return x\n'
                                        'def make_inputs():\n    return []\n')
    result = load_problems(tmp_path)
    assert [p.problem_id for p in result.problems] == ["attention/01_plain"]
    assert result.problems[0].family == "attention" and result.problems[0].solutions == {}


def test_cli_list_json(capsys, tmp_path):
    family = _copy_example(tmp_path)
    (family / "02_broken.py").write_text("x = 1\n")
    assert main(["problems", "list", "--problems-root", str(tmp_path), "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert [p["id"] for p in listing["problems"]] == ["mlp_norm/01_ok"]
    assert listing["problems"][0]["family"] == "mlp_norm" and listing["problems"][0]["min_arch"] == "sm_90a"
    assert listing["errors"][0]["path"].endswith("02_broken.py")
