"""`--protocol mkb`: MetaKernelBench's grading where ours is stricter or different, named in every verdict.

Differences it undoes: the whole-tensor precision metrics and element-wise fp8 bounds (MKB: the global rule only),
outlier draws (KernelBenchX's), the L2 flush before a timed GPU trip, and — for campaigns — a budget clock that
pauses while an attempt waits for a busy judge (MKB: plain wall clock)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

from mkb_ray.campaign.config import load_experiment
from mkb_ray.campaign.plan import plan_campaign
from mkb_ray.checker.correctness import Tolerance, compare, expected_outputs
from mkb_ray.checker.request import JudgeOptions
from mkb_ray.checker.timing import method_name
from mkb_ray.models.roster import load_roster

from conftest import REPO

CUT_KERNEL = REPO / "tests" / "adversarial" / "v2_precision_bf16_5bit_mantissa.py"
CUT_PROBLEM = "mlp_norm/01_fused_add_rmsnorm"


def test_the_global_rule_alone_lets_a_precision_cut_through_as_mkb_does():
    def norm(x):
        return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16)

    torch.manual_seed(0)
    x = torch.randn(64, 256, dtype=torch.bfloat16)
    expected = expected_outputs(norm, [x], mutates=[])
    exact = expected.anchor[0].float()
    cut = torch.where(exact.abs() < 0.02, 0.0, (exact.view(torch.int32) & -262144).view(torch.float32))
    cut = cut.to(torch.bfloat16)
    ours = Tolerance(elementwise_outputs=(0,))
    assert not compare([cut], expected, ours).passed
    mkb = ours.global_rule_only()
    assert mkb.elementwise_outputs == () and not mkb.precision_metrics and mkb.factor == ours.factor
    assert compare([cut], expected, mkb).passed
    assert not compare([torch.zeros_like(cut)], expected, mkb).passed  # the global rule itself still holds


def test_options_and_timing_method_under_the_mkb_protocol():
    ours, theirs = JudgeOptions().resolved("cuda"), JudgeOptions(protocol="mkb").resolved("cuda")
    assert ours.outlier_draws == 2 and ours.flush_l2
    assert theirs.outlier_draws == 0 and not theirs.flush_l2 and theirs.protocol == "mkb"
    assert method_name(True, 5, flush_l2=False) == "cuda_events_led_l2_warm_x5"  # GPU: the device's record decides
    assert method_name(True, 5) == "cuda_events_led_l2_flushed_x5"
    assert method_name(True, 5, device_clock=False) == "checker_roundtrip_l2_flushed_x5"  # its bound, kept beside
    assert method_name(False, 1, flush_l2=False) == "checker_roundtrip_wall_clock"  # CPU never flushes
    with pytest.raises(ValueError, match="protocol"):
        JudgeOptions(protocol="kernelbench")


# The draws' seeds, fixed: the cut breaks the global max rule as well on some draws, and which check fires first
# then depends on the draw (a CI run drew one where ours failed the global rule before the precision metrics ran).
# With base seed 1 the correctness draws (seeds 1-5, 101-102) hold the global rule and fail the precision cut.
SEED = ("--seed", "1")


def _eval(*extra: str) -> dict:
    result = subprocess.run([sys.executable, "-m", "mkb_ray.cli", "eval", CUT_PROBLEM, str(CUT_KERNEL), "--dsl",
                             "tirx", "--device", "cpu", "--json", "--warmup", "1", "--timed", "3", *SEED, *extra],
                            capture_output=True, text=True, cwd=REPO, timeout=600)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.judge
def test_a_verdict_names_its_protocol_and_mkb_grades_as_mkb_does():
    ours, theirs = _eval(), _eval("--protocol", "mkb")
    assert ours["protocol"] == "mkb-ray" and ours["tier"] == "fail" and ours["rejected_by"] == "correctness"
    assert "precision cut" in ours["reason"]
    # Under MKB's rule the precision metrics are not applied; this kernel's cut also breaks the global max rule
    # on some draws (measured: 0.112 vs a bound of 0.105), so whether it passes depends on the draw.
    assert theirs["protocol"] == "mkb" and "precision cut" not in theirs["reason"], theirs["reason"]
    assert theirs["tier"] in ("pass", "pass2x") or "max|out-anchor|" in theirs["reason"], theirs["reason"]
    assert not any("precision cut" in c["detail"] or "outlier" in c["detail"] for c in theirs["checks"])


def test_a_campaign_under_the_mkb_protocol_counts_queue_wait_and_hashes_apart(tmp_path):
    base = textwrap.dedent("""\
        name: protocol
        models: [smollm2]
        problems: {ids: [mlp_norm/01_fused_add_rmsnorm]}
        benchmark: {arms: [solo_tirx]}
    """)
    (tmp_path / "ours.yaml").write_text(base)
    (tmp_path / "theirs.yaml").write_text(base + "protocol: mkb\n")
    ours, theirs = load_experiment(tmp_path / "ours.yaml"), load_experiment(tmp_path / "theirs.yaml")
    assert ours.protocol == "mkb-ray" and not ours.budget.count_queue_wait
    assert theirs.protocol == "mkb" and theirs.budget.count_queue_wait
    roster = load_roster()
    ours_trial = plan_campaign(ours, None, roster, has_gpu=False).trials[0]
    theirs_trial = plan_campaign(theirs, None, roster, has_gpu=False).trials[0]
    assert ours_trial.config_hash != theirs_trial.config_hash  # a stored mkb-ray result is not reused for mkb
