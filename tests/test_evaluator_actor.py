"""EvaluatorActor on a local Ray (127.0.0.1): concurrent evaluations, crash accounting, plain-class use."""
from __future__ import annotations

import asyncio
import pytest

from mkb_ray.actors.evaluator import EvaluatorActor, make_evaluator
from mkb_ray.judge import JudgeOptions

from conftest import EXAMPLE_PROBLEM, REPO

GOOD = (REPO / "problems" / "mlp_norm" / "solutions" / "01_fused_add_rmsnorm.tirx_cpu.py").read_text()
EAGER = "import torch\n\ndef solve(x, residual, weight):\n    return x, residual\n"
PASSED = ("pass", "pass2x")
# A CPU kernel whose store lands far outside its buffer: the judging process dies with SIGSEGV.
CRASH = GOOD.replace("H[i, j] = T.Cast(\"bfloat16\", h[j])", "H[i + 4000000, j] = T.Cast(\"bfloat16\", h[j])")


@pytest.mark.judge
def test_concurrent_evaluations_on_local_ray(local_ray):
    evaluator = make_evaluator("cpu", slots=2, options=JudgeOptions(warmup=1, timed=3))
    refs = [evaluator.evaluate.remote(EXAMPLE_PROBLEM, source, "tirx") for source in (GOOD, EAGER, CRASH, GOOD)]
    verdicts = local_ray.get(refs, timeout=600)
    # GOOD passes, with or without a 2x speedup (timing on shared CPU cores varies); the others fail.
    tiers = [v["tier"] for v in verdicts]
    assert tiers[0] in PASSED and tiers[1:3] == ["fail", "fail"] and tiers[3] in PASSED, tiers
    assert verdicts[1]["rejected_by"] == "dsl_launch"
    assert verdicts[2]["rejected_by"] == "crash" and "SIGSEGV" in verdicts[2]["reason"]
    stats = local_ray.get(evaluator.get_stats.remote())
    assert stats["evaluations"] == 4 and stats["crashes"] == 1 and stats["busy_slots"] == 0


@pytest.mark.judge
def test_plain_class_without_a_cluster():
    actor = EvaluatorActor("cpu", slots=1, options=JudgeOptions(warmup=1, timed=2))
    verdict = asyncio.run(actor.evaluate(EXAMPLE_PROBLEM, EAGER, "tirx"))
    assert verdict["rejected_by"] == "dsl_launch" and actor.get_stats()["evaluations"] == 1
