"""The real thing on this CPU: SmolLM2-135M served by vLLM (CPU backend) under Ray Serve LLM through ModelServer,
the chat agent on the CPU-target TIRx variant (its kernels executed and judged), a SKILL.md written, and a
skill-conditioned attempt fed from it; then the workspace agent driven by the same model through real tool calls.
SmolLM2 mostly fails to write a passing kernel: the tests assert that the attempts ran and were recorded honestly,
not that the model succeeded. Each prints the per-turn latency and tokens/s it measured."""
from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Optional

import pytest

from mkb_ray.actors.evaluator import EvaluatorActor
from mkb_ray.agents.run_attempt import load_record, run_attempt
from mkb_ray.agents.skill_schema import skill_from_reply
from mkb_ray.agents.workspace import WorkspaceAgent
from mkb_ray.cli.attempt import attempt_main
from mkb_ray.judge import JudgeOptions
from mkb_ray.llm import LLMClient
from mkb_ray.models.roster import get_model
from mkb_ray.records import AttemptConfig, AttemptRecord, BudgetSpec

from conftest import EXAMPLE_PROBLEM

# Turns and submissions bound these attempts, not the clock: on a loaded machine one SmolLM2 call has taken 170 s
# (3 tokens/s), and a 300 s wall budget then left no time to ask for SKILL.md. Whether a skill exists must not
# depend on the machine's speed, so the wall budget is one no machine that can run the suite reaches. Two turns
# cover every path the test checks (a judged kernel, its feedback turn, the SKILL.md checkpoint after the first
# verdict and the closing SKILL.md turn): 4 model calls an attempt, where 6 turns took 8 (449 s of CI's time).
# SmolLM2 mostly loops until the reply limit, and decoding is the bulk of a call (17 tokens/s at a 5k-token context
# on 2 cores, ~3x slower beside a 2-core CPU hog, measured 2026-12-04): 96 tokens hold a judged kernel and a SKILL.md
# as well as 512 did (the judge and the hand-off do not care how long they are), at a fifth of the decoding.
BUDGET = {"submissions": 2, "wall_clock_s": 3600, "max_turns": 2, "reply_max_tokens": 96}


def turn_report(record: AttemptRecord) -> str:
    """Per-call latency and decode speed as measured in this attempt (what the closing reserve is sized from)."""
    ok = [c for c in record.llm_calls if c.ok]
    latencies = [c.usage.latency_s for c in ok]
    rate = sum(c.usage.completion_tokens for c in ok) / max(sum(latencies), 1e-9)
    prompts = [c.usage.prompt_tokens for c in ok]
    return (f"{len(ok)} calls, latency {min(latencies):.1f}-{max(latencies):.1f} s, {rate:.1f} completion tok/s "
            f"(prompts {min(prompts)}-{max(prompts)} tokens); turns {[round(t) for t in turn_seconds(record)]} s")


def turn_seconds(record: AttemptRecord) -> list[float]:
    """Attempt-clock seconds from one kernel turn's call to the next (the last turn is not closed)."""
    starts = [c.attempt_clock_s for c in record.llm_calls if c.purpose == "turn"]
    return [b - a for a, b in zip(starts, starts[1:])]


@pytest.mark.model
@pytest.mark.judge
def test_solo_then_skill_attempt_with_a_real_model(smollm2_server, tmp_path):
    api_base = smollm2_server.api_base
    solo_dir, skill_dir = tmp_path / "solo", tmp_path / "skill"
    began = time.monotonic()
    code = attempt_main(EXAMPLE_PROBLEM, "tirx", "smollm2", solo_dir, agent="chat", target="cpu", device="cpu",
                        api_base=api_base, budget_overrides=BUDGET, seed=1)
    solo_s = time.monotonic() - began
    solo = load_record(solo_dir)
    assert code == 0 and solo.status == "completed", (solo.stop_reason, solo.error)
    assert solo.config.arm == "solo" and solo.config.target == "cpu" and solo.model == "smollm2"
    assert solo.endpoint == api_base and not solo.synthetic and solo.template_hash and solo.problem_hash
    # Real model calls, with their usage recorded.
    assert solo.llm_calls and solo.completion_tokens > 0 and solo.prompt_tokens > 0
    assert all(call.usage.latency_s > 0 for call in solo.llm_calls)
    # Every counted submission was judged on the CPU target; the final kernel was judged once more.
    assert solo.counted_submissions <= BUDGET["submissions"]
    for submission in solo.submissions:
        if submission.counted:
            assert submission.verdict is not None and submission.verdict.device == "cpu"
    # The roster opens a ```python fence for SmolLM2 (reply_prefill), so every kernel turn yields code: at least one
    # of its kernels must have been judged for real on the CPU, and its final kernel judged once more. Whether it
    # passes is the model's business (it almost never does).
    judged = [s for s in solo.submissions if s.counted]
    assert judged, "SmolLM2 produced no judged kernel"
    assert all(s.verdict.device == "cpu" and s.verdict.reason for s in judged)
    assert solo.final_verdict is not None and solo.final_verdict.dsl == "tirx"
    assert (solo_dir / "final_kernel.py").exists()
    assert (solo_dir / "record.json").exists() and (solo_dir / "transcript.jsonl").exists()
    # Whether a skill exists must not depend on the machine's speed: SKILL.md is asked for once the first verdict
    # is back (or came with a reply), and no turn starts that would leave the closing SKILL.md call too little time.
    skill_text = (solo_dir / "SKILL.md").read_text()
    assert skill_text.strip(), f"the solo attempt wrote no SKILL.md ({turn_report(solo)})"
    assert solo.skill_md_bytes > 0 and solo.attempt_clock_s <= BUDGET["wall_clock_s"]
    # The roster has SmolLM2's SKILL.md turns decoded to the sections' JSON schema (issue 28): every such call says
    # so in the record, and SKILL.md is the rendered sections — text under the headings, no code fence.
    skill_calls = [c for c in solo.llm_calls if c.purpose in ("skill", "skill_checkpoint")]
    assert skill_calls and all(c.constrained == "skill_md_v1" for c in skill_calls)
    assert all(c.constrained is None for c in solo.llm_calls if c.purpose == "turn")
    assert skill_text.startswith("# SKILL.md\n\n## ") and "```" not in skill_text

    code = attempt_main(EXAMPLE_PROBLEM, "tirx", "smollm2", skill_dir, agent="chat", target="cpu", device="cpu",
                        api_base=api_base, skill=solo_dir / "SKILL.md", budget_overrides=BUDGET, seed=2)
    skilled = load_record(skill_dir)
    assert code == 0 and skilled.status == "completed", (skilled.stop_reason, skilled.error)
    assert skilled.config.arm == "skill" and skilled.skill_source_sha256
    first_events = [json.loads(line) for line in (skill_dir / "transcript.jsonl").read_text().splitlines()][:5]
    contents = [e["content"] for e in first_events if isinstance(e.get("content"), str)]
    assert any(skill_text.strip()[:200] in content for content in contents), \
        "the source SKILL.md is not in the skill attempt's first messages"
    print(f"\nsmollm2 endpoint up in {smollm2_server.startup_s:.0f} s; solo attempt {solo_s:.0f} s: "
          f"{solo.counted_submissions} submissions, final verdict "
          f"{solo.final_verdict.tier + ' ' + str(solo.final_verdict.rejected_by) if solo.final_verdict else None}; "
          f"skill attempt {skilled.counted_submissions} submissions, SKILL.md {skilled.skill_md_bytes} bytes\n"
          f"  solo: {turn_report(solo)}\n  skill: {turn_report(skilled)}")
    # The harness must ask for SKILL.md and keep what the model answered; whether a 135M model answers with anything
    # is its own business (CI once saw it close the opened fence at once and write nothing else).
    events = [json.loads(line) for line in (skill_dir / "transcript.jsonl").read_text().splitlines()]
    answers = [e["content"] for e in events
               if e.get("role") == "assistant" and e.get("purpose") in ("skill", "skill_checkpoint")]
    assert answers, f"the skill attempt was never asked for SKILL.md ({turn_report(skilled)})"
    assert skilled.skill_md_bytes > 0 or all(skill_from_reply(a) is None for a in answers), \
        f"the skill attempt's SKILL.md is empty although the model answered with one ({turn_report(skilled)})"


# The tools the harness makes SmolLM2 call, turn by turn (a named tool_choice; SmolLM2 writes every argument), then
# tool_choice="required" for the rest: it never calls a tool under "auto" (measured), and under "required" alone it
# calls finish at once (measured 2026-12-01).
WORKSPACE_TOOLS = ["write_file", "submit", "shell", "required"]
# Bounded by turns as BUDGET is. Six, not fewer: with four, seed 3's third and fourth replies ran into the token
# limit (finish_reason "length", a tool call cut short), and the test ran a second attempt (86 s instead of 42).
WORKSPACE_BUDGET = BudgetSpec(submissions=2, wall_clock_s=3600, max_turns=6, reply_max_tokens=256)


def _workspace_attempt(api_base: str, out: Path, seed: int) -> AttemptRecord:
    config = AttemptConfig(problem_id=EXAMPLE_PROBLEM, dsl="tirx", target="cpu", model="smollm2",
                           agent="workspace", budget=WORKSPACE_BUDGET, out_dir=out, attempt_id="e2e-workspace",
                           seed=seed)
    # Greedy decoding: the roster's SmolLM2 sends no per-request seed (vLLM's CPU backend dies on one), so at its
    # temperature 0.2 the "seed" above did not fix the replies, and two draws in a row once ran a forced write_file
    # call into the reply cap (2026-12-05). At temperature 0 the same prompt gets the same reply.
    client = LLMClient(get_model("smollm2").model_copy(update={"temperature": 0.0}), api_base)
    evaluator = EvaluatorActor("cpu", slots=1, options=JudgeOptions(warmup=1, timed=2))
    factory = lambda ctx: WorkspaceAgent(ctx, tool_choice=WORKSPACE_TOOLS)  # noqa: E731
    return asyncio.run(run_attempt(config, client, evaluator, workspace_agent_factory=factory))


def _untooled_turns(record: AttemptRecord) -> list[tuple[int, Optional[str], Optional[str], int]]:
    """(turn, error, finish_reason, reply chars) of every kernel turn whose reply carried no tool call."""
    return [(c.turn, c.error, c.finish_reason, c.reply_chars) for c in record.llm_calls
            if c.purpose == "turn" and not (c.ok and c.tool_calls >= 1)]


@pytest.mark.model
@pytest.mark.judge
def test_workspace_agent_driven_by_real_tool_calls(smollm2_server, tmp_path):
    """The real tool-call path with a real model: vLLM's tool parser, our argument checks, the bubblewrap shell,
    write_file inside the sandbox, submit through the judge. Whatever SmolLM2 sends costs at most its turn.

    Seeded. Twice in recent CI runs (unseeded then), vLLM (0.32, CPU backend) answered a forced (named)
    tool_choice with a reply its parser did not read as a call — once one turn, once all four of an attempt. Our
    harness answers that correctly (the no-tool-call turn, tested in test_workspace_agent.py), but it leaves this
    path unchecked: such an attempt is reported and run once more with another seed; a second miss fails."""
    out = tmp_path / "workspace_attempt"
    record = _workspace_attempt(smollm2_server.api_base, out, seed=3)
    if record.status == "completed" and _untooled_turns(record):
        print(f"\nforced tool calls not honoured (seed 3): {_untooled_turns(record)}; trying seed 4")
        out = tmp_path / "workspace_attempt_seed4"
        record = _workspace_attempt(smollm2_server.api_base, out, seed=4)
    assert record.status == "completed" and record.error is None, (record.stop_reason, record.error)
    events = [json.loads(line) for line in (out / "transcript.jsonl").read_text().splitlines()]
    tools = [e for e in events if e["event"] == "tool"]
    by_turn = {e["turn"]: e for e in reversed(tools)}  # the first call of each turn
    # Every turn's reply carried a tool call (forced), and each call was carried out or answered, never dropped.
    turns = [c for c in record.llm_calls if c.purpose == "turn"]
    assert turns and not _untooled_turns(record), _untooled_turns(record)
    assert set(by_turn) == {c.turn for c in turns}
    assert all(e["result"].strip() for e in tools)
    # The forced tools ran for real: a file written in the workspace, a submission recorded (judged, or refused
    # with its reason), a command run in the sandbox with its exit code.
    assert record.turns >= 3, (record.turns, record.stop_reason)  # turns 1-3 are forced: none can be finish
    first, second, third = by_turn[1], by_turn[2], by_turn[3]
    assert first["name"] == "write_file" and ("Wrote" in first["result"] or first["malformed"]), first
    assert second["name"] == "submit" and record.submissions, second
    assert all(s.verdict is not None or s.refused_reason for s in record.submissions)
    assert third["name"] == "shell" and ("exit code" in third["result"] or third["malformed"]), third
    print(f"\nworkspace attempt: stop {record.stop_reason}, {record.turns} turns, tools "
          f"{[(e['turn'], e['name'], e['malformed']) for e in tools]}, {len(record.submissions)} submission(s), "
          f"SKILL.md {record.skill_md_bytes} bytes; {turn_report(record)}")
