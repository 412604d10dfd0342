"""Problem files in MetaKernelBench's own layout (no sidecars), judged as a MetaKernelBench user would meet them.

The files below are written here in that format (a docstring, `reference`, `make_inputs`, shape constants; no
TOML), each with one of the habits that misled the judge: tensors pinned to CUDA, no smoke preset, a Blackwell
problem, a malformed file, and a checkout root passed instead of its problems/ folder."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from mkb_ray.campaign.config import ExperimentConfigError, load_experiment
from mkb_ray.campaign.plan import plan_campaign
from mkb_ray.cli import main
from mkb_ray.judge import JudgingRefused, judge_kernel
from mkb_ray.checker.problem_loader import load_problem
from mkb_ray.models.roster import load_roster
from mkb_ray.problems import load_problems

from conftest import has_gpu

PINNED = '''\
"""Scale a bf16 tensor by two (pinned to the GPU, as MetaKernelBench files are)."""
import torch

N = 1 << 20


def reference(x):
    return x * 2


def make_inputs():
    x = torch.randn(N, dtype=torch.bfloat16, device="cuda")
    return [x]
'''

NO_SMOKE = '''\
"""Scale a float32 matrix by two (no smoke preset anywhere)."""
import torch

TOKENS = 4096
HIDDEN = 8192


def reference(x):
    return x * 2


def make_inputs():
    return [torch.randn(TOKENS, HIDDEN)]
'''

# Halving each constant breaks the relation HIDDEN == HEADS * HEAD_DIM that make_inputs relies on.
NO_SMOKE_RELATED = '''\
"""Per-head view of a projection (shapes tied together)."""
import torch

TOKENS = 8
HEADS = 32
HEAD_DIM = 128
HIDDEN = 4096


def reference(x):
    return x.view(TOKENS, HEADS, HEAD_DIM).sum(-1)


def make_inputs():
    return [torch.randn(TOKENS, HIDDEN)]
'''

BLACKWELL = '''\
"""nvfp4 block-scaled GEMM for Blackwell."""
import torch

M = 256


def reference(a):
    return a @ a.T


def make_inputs():
    return [torch.randn(M, M)]
'''

BLACKWELL_BY_CONSTANT = '''\
"""A problem that states its architecture."""
import torch

ARCH = "sm_100a"


def reference(a):
    return a


def make_inputs():
    return [torch.randn(4)]
'''

# A CPU-target TIRx kernel for NO_SMOKE: out = 2 * x, serial loops.
DOUBLE_KERNEL = '''\
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(rows, cols):
    @T.prim_func
    def double(x_ptr: T.handle, o_ptr: T.handle):
        X = T.match_buffer(x_ptr, (rows, cols), "float32")
        O = T.match_buffer(o_ptr, (rows, cols), "float32")
        for i in T.serial(rows):
            for j in T.serial(cols):
                O[i, j] = X[i, j] * T.float32(2)

    return tvm.compile(tvm.IRModule({"main": double}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    out = torch.empty_like(x)
    _compiled[key](x.contiguous(), out)
    return out
'''


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A scratch MetaKernelBench checkout: <checkout>/problems/<family>/NN_name.py, no sidecars."""
    files = {"quantization/01_scale_pinned.py": PINNED, "mlp_norm/01_double_no_smoke.py": NO_SMOKE,
             "mlp_norm/02_heads_tied.py": NO_SMOKE_RELATED, "moe/01_nvfp4_gemm.py": BLACKWELL,
             "moe/02_stated_arch.py": BLACKWELL_BY_CONSTANT,
             "kv_cache/01_broken.py": '"""Broken."""\ndef reference(x:\n'}
    for name, text in files.items():
        path = tmp_path / "problems" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "kernel.py").write_text(DOUBLE_KERNEL)
    return tmp_path


def test_the_registry_reads_the_habits_of_metakernelbench_files(checkout):
    problems = load_problems(checkout / "problems")
    by_id = {p.problem_id: p for p in problems.problems}
    pinned = by_id["quantization/01_scale_pinned"]
    assert pinned.cuda_pins == [12]  # the line with device="cuda"
    assert by_id["mlp_norm/01_double_no_smoke"].cuda_pins == []
    nvfp4, stated = by_id["moe/01_nvfp4_gemm"], by_id["moe/02_stated_arch"]
    assert nvfp4.min_arch == "sm_100a" and "nvfp4" in nvfp4.min_arch_source and "line 1" in nvfp4.min_arch_source
    assert stated.min_arch == "sm_100a" and "ARCH = 'sm_100a'" in stated.min_arch_source
    assert by_id["mlp_norm/01_double_no_smoke"].min_arch == "sm_90a"
    # Refusals name the file and the reason; an sm_100a problem is refused on Hopper, allowed on Blackwell.
    refusal = pinned.judging_refusal("cpu", None)
    assert str(pinned.path) in refusal and "line 12" in refusal and "no GPU" in refusal
    assert pinned.judging_refusal("cuda", "sm_90a") is None
    hopper = nvfp4.judging_refusal("cuda", "sm_90a")
    assert "sm_100a" in hopper and "sm_90a" in hopper and str(nvfp4.path) in hopper
    assert nvfp4.judging_refusal("cuda", "sm_100a") is None
    assert by_id["mlp_norm/01_double_no_smoke"].judging_refusal("cpu", None) is None


@pytest.mark.judge
def test_a_cuda_pinned_problem_is_refused_without_costing_a_verdict(checkout, capsys):
    if has_gpu():
        pytest.skip("this machine has a GPU: a CUDA-pinned problem is judgeable here")
    root = checkout / "problems"
    problem = load_problems(root).get("quantization/01_scale_pinned")
    with pytest.raises(JudgingRefused, match="line 12"):
        judge_kernel(problem, checkout / "kernel.py", "tirx", "cpu")
    code = main(["eval", "quantization/01_scale_pinned", str(checkout / "kernel.py"), "--dsl", "tirx",
                 "--device", "cpu", "--problems-root", str(root)])
    err = capsys.readouterr().err
    assert code == 2 and "not judged" in err and "01_scale_pinned.py" in err and "puts its tensors on CUDA" in err
    # validate: one row saying why, not four failures blaming the (absent) solutions
    code = main(["problems", "validate", "--device", "cpu", "--json", "--problems-root", str(root),
                 "--problem", "quantization/01_scale_pinned"])
    rows = json.loads(capsys.readouterr().out)["rows"]
    refused = [r for r in rows if r["problem_id"] == "quantization/01_scale_pinned"]
    assert code == 1 and [r["variant"] for r in refused] == ["refused"] and "CUDA" in refused[0]["summary"]


def test_a_campaign_on_a_cuda_pinned_problem_is_refused_at_planning(checkout, tmp_path):
    config_path = tmp_path / "campaign.yaml"
    config_path.write_text(textwrap.dedent(f"""\
        name: mkb-checkout
        models: [smollm2]
        problems:
          root: {checkout / 'problems'}
          families: [quantization]
        benchmark:
          arms: [solo_tirx]
    """))
    config = load_experiment(config_path)
    with pytest.raises(ExperimentConfigError, match=r"01_scale_pinned\.py \(line 12\)"):
        plan_campaign(config, None, load_roster(), has_gpu=False)
    assert plan_campaign(config, None, load_roster(), has_gpu=True).trials  # with a GPU it plans


def test_a_problem_without_a_smoke_preset_is_labelled_by_what_was_applied(checkout):
    root = checkout / "problems"
    derived = load_problem(root / "mlp_norm" / "01_double_no_smoke.py", "mlp_norm/01_double_no_smoke", "smoke")
    assert derived.preset == "smoke_derived" and derived.overrides == {"TOKENS": 64, "HIDDEN": 64}
    assert derived.shapes["TOKENS"] == 64 and derived.shapes["HIDDEN"] == 64
    # Shapes tied by a relation the halving breaks: production shapes, and the label says so.
    tied = load_problem(root / "mlp_norm" / "02_heads_tied.py", "mlp_norm/02_heads_tied", "smoke")
    assert tied.preset == "production" and tied.overrides == {} and tied.shapes["HIDDEN"] == 4096
    production = load_problem(root / "mlp_norm" / "01_double_no_smoke.py", "x", "production")
    assert production.preset == "production" and production.shapes["HIDDEN"] == 8192


@pytest.mark.judge
def test_the_verdict_of_a_problem_without_smoke_preset_names_the_derived_shapes(checkout):
    problem = load_problems(checkout / "problems").get("mlp_norm/01_double_no_smoke")
    verdict = judge_kernel(problem, checkout / "kernel.py", "tirx", "cpu")
    assert verdict.preset == "smoke_derived", (verdict.preset, verdict.reason)
    assert verdict.shapes["HIDDEN"] == 64 and verdict.passed, verdict.reason


def test_eval_of_a_malformed_problem_reports_its_parse_error(checkout, capsys):
    code = main(["eval", "kv_cache/01_broken", str(checkout / "kernel.py"), "--dsl", "tirx", "--device", "cpu",
                 "--problems-root", str(checkout / "problems")])
    err = capsys.readouterr().err
    assert code == 2 and "malformed" in err and "syntax error at line 2" in err and "no problem" not in err


def test_a_checkout_root_instead_of_its_problems_folder_says_where_to_point(checkout, capsys):
    code = main(["problems", "list", "--problems-root", str(checkout)])
    err = capsys.readouterr().err
    assert code == 2 and f"no problems under {checkout}" in err
    assert f"--problems-root {checkout / 'problems'}" in err
    empty = checkout / "empty"
    empty.mkdir()
    assert main(["problems", "list", "--problems-root", str(empty)]) == 2
    assert "no problems under" in capsys.readouterr().err
