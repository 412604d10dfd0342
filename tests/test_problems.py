"""The problem registry: the shipped suite loads; malformed problems are reported by path and field."""
from __future__ import annotations

import json
import re
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
        # The closure probe names a shipped solution of this very problem as its refutation.
        probe = problem.sidecar.closure_probe
        assert probe is not None, f"{problem.problem_id} has no closure probe"
        named = re.findall(r"solutions/([\w.]+\.py)", probe.refuted_by)
        assert named and all((problem.path.parent / "solutions" / name).is_file() and name.startswith(
            problem.path.stem + ".") for name in named), (problem.problem_id, probe.refuted_by)
    claims = [p.sidecar.closure_probe.claim for p in problems.problems]
    assert len(set(claims)) == len(claims), "a closure probe is reused across problems"


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


def _computation_fingerprint(path: Path) -> str:
    """reference() with every number and every shape constant blanked: two problems that differ only in their
    numbers (the same computation at other shapes or constants) get the same fingerprint."""
    import ast

    tree = ast.parse(path.read_text())
    shapes = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
              if isinstance(t, ast.Name) and t.id.isupper()}
    reference = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "reference")

    class Blank(ast.NodeTransformer):
        def visit_Constant(self, node):
            return ast.Constant(value="#") if isinstance(node.value, (int, float)) else node

        def visit_Name(self, node):
            return ast.Name(id="SHAPE", ctx=node.ctx) if node.id in shapes else node

    blanked = Blank().visit(reference)
    blanked.name = "reference"
    return ast.dump(blanked, annotate_fields=False, include_attributes=False)


def test_no_two_shipped_problems_are_the_same_computation_with_other_numbers(problems, tmp_path):
    seen: dict[str, str] = {}
    for problem in problems.problems:
        fingerprint = _computation_fingerprint(problem.path)
        assert fingerprint not in seen, f"{problem.problem_id} computes what {seen.get(fingerprint)} computes"
        seen[fingerprint] = problem.problem_id
    # The fingerprint sees a copy with other numbers as the same computation, and another operation as another.
    original = tmp_path / "a.py"
    original.write_text("N = 4096\nEPS = 1e-6\n\ndef reference(x):\n    return x[:N] * 2 + EPS\n")
    renumbered = tmp_path / "b.py"
    renumbered.write_text("N = 128\nEPS = 1e-5\n\ndef reference(x):\n    return x[:N] * 3 + EPS\n")
    other = tmp_path / "c.py"
    other.write_text("N = 4096\nEPS = 1e-6\n\ndef reference(x):\n    return x[:N] / 2 + EPS\n")
    assert _computation_fingerprint(original) == _computation_fingerprint(renumbered)
    assert _computation_fingerprint(original) != _computation_fingerprint(other)
