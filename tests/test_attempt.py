"""run_attempt end to end with a scripted model and the real judge (CPU TIRx variant): the output directory and
the record's contents, the skill arm (fed from a solo attempt's SKILL.md; skipped when that is empty),
infrastructure failures recorded rather than raised, the task statement, configs, `mkb attempt` usage errors, and
the evaluator port over a Ray actor handle."""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import pytest
from pydantic import ValidationError

from mkb_ray.actors.evaluator import EvaluatorActor, make_evaluator
from mkb_ray.agents.evaluator_port import RayEvaluatorPort, as_evaluator_port
from mkb_ray.agents.skill import template_hash
from mkb_ray.agents.run_attempt import build_task_statement, load_record, run_attempt
from mkb_ray.cli.attempt import AttemptUsageError, add_arguments as add_attempt_arguments, parse_budget_overrides
from mkb_ray.cli.attempt import run as attempt_from_args
from mkb_ray.judge import JudgeOptions
from mkb_ray.checker.problem_loader import problem_hash
from mkb_ray.llm import LLMClient, ScriptedReply
from mkb_ray.records import AttemptConfig, BudgetSpec

from conftest import EXAMPLE_PROBLEM, REPO
from refused_port import refused_port

GOOD = (REPO / "problems" / "mlp_norm" / "solutions" / "01_fused_add_rmsnorm.tirx_cpu.py").read_text()
EAGER = "import torch\n\ndef solve(x, residual, weight):\n    return x + residual, residual\n"
SKILL_TEXT = ("# SKILL\n- Evidence: submission 1 returned eager results and failed the DSL-launch check, so every "
              "output must come from a compiled kernel launch.\n- Evidence: a serial pass per row was correct at "
              "the CPU test shapes (submission 2, pass).\n")


def head_commit() -> Optional[str]:
    """The checkout's HEAD as `git rev-parse` says; None only where the repository has no git metadata."""
    if not (REPO / ".git").exists():  # e.g. an unpacked sdist: nothing to record
        return None
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                          timeout=10, check=True).stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{40}", head), head
    return head


def spec(context_length: int = 1_000_000) -> SimpleNamespace:
    return SimpleNamespace(name="scripted", litellm_id="openai/scripted", context_length=context_length,
                           supports_tools=False, num_gpus=0, max_output_tokens=None, prices=None)


class Recorder:
    def __init__(self, replies: list[ScriptedReply]) -> None:
        self.replies, self.seen = replies, []

    def __call__(self, messages: list[dict[str, Any]], index: int) -> ScriptedReply:
        self.seen.append([dict(m) for m in messages])
        return self.replies[index]


def config(out: Path, **fields: Any) -> AttemptConfig:
    return AttemptConfig(problem_id=EXAMPLE_PROBLEM, dsl="tirx", target="cpu", model="scripted", agent="chat",
                         out_dir=out, **fields)


def run(cfg: AttemptConfig, script: Any, evaluator: Any, **client_kwargs: Any):
    client = LLMClient(spec(), script=script, retry_backoff_s=0.0, **client_kwargs)
    return asyncio.run(run_attempt(cfg, client, evaluator))


@pytest.fixture(scope="module")
def evaluator() -> EvaluatorActor:
    return EvaluatorActor("cpu", slots=1, options=JudgeOptions(warmup=1, timed=2))


@pytest.fixture(scope="module")
def solo(tmp_path_factory, evaluator):
    """One solo attempt: an eager (failing) kernel, the SKILL.md checkpoint it triggers (no skill yet after a
    verdict), then the good kernel with a SKILL.md, then the closing turn."""
    out = tmp_path_factory.mktemp("solo") / "attempt"
    script = Recorder([
        ScriptedReply(f"First try.\n```python\n{EAGER}```"),
        ScriptedReply("```skill\n- An eager-only kernel is rejected: it launched no TIRx kernel.\n```"),
        ScriptedReply(f"```python\n{GOOD}```\n```skill\n{SKILL_TEXT}```"),
        ScriptedReply(f"```skill\n{SKILL_TEXT}```"),
    ])
    record = run(config(out, budget=BudgetSpec(max_turns=2), attempt_id="scripted/mlp_norm/r0/solo"), script,
                 evaluator)
    return out, record, script


@pytest.mark.judge
def test_solo_attempt_output_directory_and_record(solo):
    out, record, script = solo
    for name in ("record.json", "transcript.jsonl", "submissions/01.py", "submissions/01.verdict.json",
                 "submissions/02.py", "submissions/02.verdict.json", "final_kernel.py", "final_verdict.json",
                 "SKILL.md"):
        assert (out / name).is_file(), name
    assert load_record(out) == record  # record.json reads back exactly (schema-validated)

    assert record.status == "completed" and record.stop_reason == "max_turns" and record.turns == 2
    assert record.template_hash == template_hash() and len(record.template_hash) == 64
    assert record.problem_hash == problem_hash(REPO / "problems" / "mlp_norm" / "01_fused_add_rmsnorm.py")
    task_text = script.seen[0][1]["content"]
    assert record.task_sha256 == hashlib.sha256(task_text.encode()).hexdigest()
    assert {"torch", "apache-tvm", "litellm", "pydantic"} <= set(record.package_versions)
    assert record.git_commit == head_commit()
    assert record.model == "scripted" and record.litellm_model == "openai/scripted" and record.endpoint is None

    first, second = record.submissions
    assert first.counted and first.verdict.rejected_by == "dsl_launch"
    assert second.counted and second.verdict.tier in ("pass", "pass2x")
    assert second.kernel_sha256 == hashlib.sha256(GOOD.encode()).hexdigest()
    assert json.loads((out / "submissions/02.verdict.json").read_text()) == second.verdict.model_dump(mode="json")
    assert record.final_verdict.tier in ("pass", "pass2x")
    assert record.final_verdict.source_hash == second.kernel_sha256 and (out / "final_kernel.py").read_text() == GOOD
    assert record.final_eval_s > 0 and record.final_verdict_path == "final_verdict.json"
    assert (out / "SKILL.md").read_text().strip() == SKILL_TEXT.strip() and record.skill_md_bytes > 0

    # litellm's mock reports 10 prompt + 20 completion tokens per call; four calls (two turns, the checkpoint after
    # the first verdict, one closing).
    assert [c.purpose for c in record.llm_calls] == ["turn", "skill_checkpoint", "turn", "skill"]
    assert all(c.ok for c in record.llm_calls) and (record.prompt_tokens, record.completion_tokens) == (40, 80)
    assert record.attempt_clock_s <= record.wall_s + 1e-6

    events = [json.loads(line) for line in (out / "transcript.jsonl").read_text().splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-2:] == ["stop", "final"] and kinds.count("submission") == 2
    assert events[0]["template_hash"] == record.template_hash


@pytest.mark.judge
def test_task_statement_has_what_the_agent_needs(solo):
    _, _, script = solo
    system, task = script.seen[0][0]["content"], script.seen[0][1]["content"]
    assert "```python" in system and "```skill" in system  # the reply protocol
    assert 'target="llvm"' in task and "TOKENS=16" in task  # the CPU variant and its shapes
    assert "def reference(" in task and "def make_inputs(" in task  # the reference file
    assert "The grading contract" in task and "knockout" in task  # CONTRACT.md
    assert "No code" in task and "SKILL.md" in task  # the skill instructions
    assert "A SKILL.md from an earlier attempt" not in task  # solo arm


@pytest.mark.judge
def test_skill_attempt_is_fed_the_source_skill(solo, tmp_path, evaluator):
    source = solo[0] / "SKILL.md"
    script = Recorder([ScriptedReply(f"```python\n{GOOD}```\n```skill\n- confirmed: serial rows pass\n```")])
    record = run(config(tmp_path / "skill", arm="skill", skill_path=source, budget=BudgetSpec(max_turns=1)),
                 script, evaluator)
    task = script.seen[0][1]["content"]
    assert "A SKILL.md from an earlier attempt" in task and SKILL_TEXT.strip() in task
    assert task.index("A SKILL.md from an earlier attempt") > task.index("## Budget")  # the header follows the task
    assert record.status == "completed" and record.config.arm == "skill"
    assert record.skill_source_sha256 == hashlib.sha256(SKILL_TEXT.strip().encode()).hexdigest()
    assert record.final_verdict.tier in ("pass", "pass2x")


class NoEvaluator:
    async def evaluate(self, *args: Any, **kwargs: Any) -> dict:
        raise AssertionError("a skipped attempt must not judge anything")


@pytest.mark.parametrize("content", ["", "  \n\n  "])
def test_empty_source_skill_skips_the_attempt(tmp_path, content):
    source = tmp_path / "SKILL.md"
    source.write_text(content)
    script = Recorder([])  # any model call would fail: none may happen
    record = run(config(tmp_path / "out", arm="skill", skill_path=source), script, NoEvaluator())
    assert record.status == "skipped" and record.stop_reason == "empty_source_skill"
    assert script.seen == [] and record.llm_calls == [] and record.submissions == [] and record.final_verdict is None
    assert load_record(tmp_path / "out").status == "skipped"


def test_missing_source_skill_is_an_error_record(tmp_path):
    record = run(config(tmp_path / "out", arm="skill", skill_path=tmp_path / "nope.md"), Recorder([]), NoEvaluator())
    assert record.status == "error" and "source SKILL.md" in record.error
    assert load_record(tmp_path / "out").status == "error"


class DeadEvaluator:
    async def evaluate(self, *args: Any, **kwargs: Any) -> dict:
        raise RuntimeError("the evaluator actor died")


def test_dead_evaluator_ends_the_attempt_as_an_error_record(tmp_path):
    script = Recorder([ScriptedReply(f"```python\n{GOOD}```")])
    record = run(config(tmp_path / "out"), script, DeadEvaluator())
    assert record.status == "error" and record.stop_reason == "error" and "evaluator actor died" in record.error
    assert (tmp_path / "out" / "record.json").is_file() and (tmp_path / "out" / "submissions" / "01.py").is_file()


def test_unreachable_model_server_is_an_llm_error(tmp_path):
    with refused_port() as port:  # bound on loopback, never listened on: connections are refused at once
        endpoint = f"http://127.0.0.1:{port}/v1"
        client = LLMClient(spec(), endpoint, max_retries=1, retry_backoff_s=0.0, timeout_s=20)
        record = asyncio.run(run_attempt(config(tmp_path / "out"), client, NoEvaluator()))
    assert record.status == "error" and record.stop_reason == "llm_error" and "connection" in record.error
    assert record.endpoint == endpoint and record.litellm_model == "hosted_vllm/scripted"
    assert len(record.llm_calls) == 1 and not record.llm_calls[0].ok


def test_task_statement_is_clipped_to_a_small_context(tmp_path):
    from mkb_ray.problems import load_problems

    problem = load_problems().get(EXAMPLE_PROBLEM)
    cfg = config(tmp_path, arm="skill", skill_path=tmp_path / "SKILL.md")
    big_skill = "- a claim backed by a verdict\n" * 2000  # ~60k characters
    task, notes = build_task_statement(cfg, problem, big_skill, context_tokens=8192, reply_tokens=1024)
    assert any("clipped" in note for note in notes) and "clipped to fit the model's context" in task.text
    assert len(task.text) <= (8192 - 1024 - 1000 - 400) * 3
    assert "def reference(" in task.text and "The grading contract" in task.text  # never clipped
    roomy, roomy_notes = build_task_statement(cfg, problem, big_skill, context_tokens=1_000_000, reply_tokens=4096)
    assert big_skill.strip() in roomy.text and not any("clipped" in n for n in roomy_notes)


def test_smollm2_sees_the_whole_task_statement(tmp_path):
    """SmolLM2's 8,192-token context holds the full statement (docs included) with room for a reply and one
    exchange; docs that grow past that get clipped, and this test says so."""
    from mkb_ray.models.roster import get_model
    from mkb_ray.problems import load_problems

    smollm2 = get_model("smollm2")
    task, notes = build_task_statement(config(tmp_path), load_problems().get(EXAMPLE_PROBLEM), None,
                                       smollm2.context_length, smollm2.max_output_tokens)
    assert not any("clipped" in n for n in notes), f"the TIRx docs no longer fit SmolLM2's context: {notes}"
    assert task.docs_text.strip() and "(No offline documentation" not in task.text


def test_attempt_config_is_validated(tmp_path):
    with pytest.raises(ValidationError, match="target 'cpu' exists only for dsl 'tirx'"):
        AttemptConfig(problem_id=EXAMPLE_PROBLEM, dsl="cutedsl", target="cpu", model="m", out_dir=tmp_path)
    with pytest.raises(ValidationError, match="arm 'skill' needs skill_path"):
        AttemptConfig(problem_id=EXAMPLE_PROBLEM, dsl="tirx", model="m", arm="skill", out_dir=tmp_path)
    with pytest.raises(ValidationError, match="wall_clock"):
        BudgetSpec(wall_clock=60)  # a typo names the field
    assert BudgetSpec().model_dump()["submissions"] == 10 and BudgetSpec().wall_clock_s == 2400


def test_budget_overrides_and_usage_errors(tmp_path, capsys):
    assert parse_budget_overrides(["wall_clock_s=60", "submissions=3", "tokens=none"]) == {
        "wall_clock_s": "60", "submissions": "3", "tokens": None}
    with pytest.raises(AttemptUsageError, match="unknown budget field 'wallclock'"):
        parse_budget_overrides(["wallclock=60"])
    with pytest.raises(AttemptUsageError, match="submissions"):
        parse_budget_overrides(["submissions=-1"])
    parser = argparse.ArgumentParser()
    add_attempt_arguments(parser)
    for argv, message in [
        ([EXAMPLE_PROBLEM, "--dsl", "tirx", "--model", "no-such-model"], "no model 'no-such-model'"),
        (["mlp_norm/99_nothing", "--dsl", "tirx", "--model", "smollm2"], "no problem 'mlp_norm/99_nothing'"),
        ([EXAMPLE_PROBLEM, "--dsl", "cutedsl", "--target", "cpu", "--model", "smollm2"], "only for dsl 'tirx'"),
        ([EXAMPLE_PROBLEM, "--dsl", "tirx", "--model", "smollm2", "--budget", "turns=3"], "unknown budget field"),
        ([EXAMPLE_PROBLEM, "--dsl", "tirx", "--model", "smollm2", "--skill", str(tmp_path / "x.md")],
         "no source SKILL.md"),
    ]:
        args = parser.parse_args(argv + ["--out", str(tmp_path / "out")])
        assert attempt_from_args(args) == 2
        assert message in capsys.readouterr().err


@pytest.mark.judge  # the actor judges, in a Ray worker (`ray` comes with the local_ray fixture)
def test_evaluator_port_over_a_ray_actor_handle(local_ray, tmp_path):
    handle = make_evaluator("cpu", slots=1, options=JudgeOptions(warmup=1, timed=2))
    port = as_evaluator_port(handle)
    assert isinstance(port, RayEvaluatorPort)
    record = run(config(tmp_path / "out", budget=BudgetSpec(max_turns=1)),
                 Recorder([ScriptedReply(f"```python\n{GOOD}```\n```skill\n- serial rows pass\n```")]), handle)
    assert record.status == "completed" and record.submissions[0].verdict.tier in ("pass", "pass2x")
    assert record.final_verdict.tier in ("pass", "pass2x")
