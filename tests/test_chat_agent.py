"""The chat agent with a scripted model (a real LLMClient driven by litellm's mock_response) and the real judge on
the CPU TIRx variant: malformed replies, the submission budget (the 11th is refused), the wall-clock budget (with a
stand-in judge of fixed speed), queue time, and the reply parsing it relies on."""
from __future__ import annotations

import asyncio
import hashlib
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mkb_ray.actors.evaluator import EvaluatorActor
from mkb_ray.agents.budget import Budget
from mkb_ray.agents.chat import fenced_blocks, pick_kernel, pick_skill
from mkb_ray.agents.context import AttemptStopped, fit_messages
from mkb_ray.agents.run_attempt import run_attempt
from mkb_ray.judge import JudgeOptions
from mkb_ray.llm import LLMClient, ScriptedReply
from mkb_ray.records import AttemptConfig, BudgetSpec, CheckResult, LLMUsage, Verdict

from scripted_llm import Recorder

from conftest import EXAMPLE_PROBLEM, REPO

GOOD = (REPO / "problems" / "mlp_norm" / "solutions" / "01_fused_add_rmsnorm.tirx_cpu.py").read_text()
# Rejected by the static checks inside the judging process: the quickest real verdict (~1 s).
SYNTAX_ERROR = "import torch\n\ndef solve(x, residual, weight):\n    return x +\n"


def kernel_reply(source: str, skill: str | None = None, prose: str = "Here is my kernel.") -> ScriptedReply:
    text = f"{prose}\n```python\n{source}\n```\n"
    if skill is not None:
        text += f"```skill\n{skill}\n```\n"
    return ScriptedReply(text)


def big_context_spec() -> SimpleNamespace:
    return SimpleNamespace(name="scripted", litellm_id="openai/scripted", context_length=1_000_000,
                           supports_tools=False, num_gpus=0, max_output_tokens=None, prices=None)


def make_config(tmp_path: Path, **budget: Any) -> AttemptConfig:
    return AttemptConfig(problem_id=EXAMPLE_PROBLEM, dsl="tirx", target="cpu", model="scripted", agent="chat",
                         budget=BudgetSpec(**budget), out_dir=tmp_path / "attempt")


@pytest.fixture(scope="module")
def evaluator() -> EvaluatorActor:
    return EvaluatorActor("cpu", slots=1, options=JudgeOptions(warmup=1, timed=2))


def attempt(tmp_path: Path, evaluator: Any, script: Recorder, **budget: Any):
    client = LLMClient(big_context_spec(), script=script, retry_backoff_s=0.0)
    return asyncio.run(run_attempt(make_config(tmp_path, **budget), client, evaluator))


class StaticRejections:
    """A stand-in judge of fixed speed: every kernel comes back rejected by the static checks after `judge_s`.
    For tests of the agent's clock, where the real judge's time (a checker start, seconds that vary with the
    machine's load, charged to the attempt clock) would make the outcome depend on the machine."""

    def __init__(self, judge_s: float = 0.5) -> None:
        self.judge_s = judge_s

    async def evaluate(self, problem_id, kernel_source, dsl, preset=None, seed=None):
        started = time.monotonic()
        await asyncio.sleep(self.judge_s)
        detail = "SyntaxError: invalid syntax (kernel.py, line 4)"
        return Verdict(problem_id=problem_id, source_hash=hashlib.sha256(kernel_source.encode()).hexdigest(),
                       dsl=dsl, device="cpu", preset=preset or "production", seed=seed or 0, compiled=False,
                       executed=False, tier="fail", rejected_by="static", reason=f"static: {detail}",
                       checks=[CheckResult(name="static", passed=False, detail=detail)],
                       wall_s=time.monotonic() - started).model_dump(mode="json")


# -- malformed replies ----------------------------------------------------------------------------------------
@pytest.mark.judge
def test_malformed_replies_cost_a_turn_and_never_crash(tmp_path, evaluator):
    not_utf8 = GOOD.replace("EPS = 1e-6", "EPS = 1e-6  # \udcff")  # a lone surrogate: no UTF-8 encoding exists
    padded = GOOD + "\n# " + "x" * 4000  # over the 3,000-byte kernel limit below
    script = Recorder([
        ScriptedReply(""),
        ScriptedReply("I would start with a loop over the rows."),
        ScriptedReply("y" * 10_000_000),
        kernel_reply(not_utf8),
        kernel_reply(padded),
        kernel_reply(GOOD, skill="- One serial pass per row passed on CPU (verdict: pass)."),
        ScriptedReply("```skill\n# SKILL\n- A serial pass per row was correct on the CPU target (submission 3).\n```"),
    ])
    record = attempt(tmp_path, evaluator, script, kernel_bytes=3000, max_turns=6)

    assert record.status == "completed" and record.stop_reason == "max_turns" and record.turns == 6
    assert "empty" in script.feedback_after(1)
    assert "had no kernel" in script.feedback_after(2)
    assert "10,000,000 characters long, over the limit" in script.feedback_after(3)
    assert "not valid UTF-8" in script.feedback_after(4) and "does not count" in script.feedback_after(4)
    assert "over the 3,000-byte limit" in script.feedback_after(5)
    assert "Verdict: PASS" in script.feedback_after(6)
    # The 10 MB reply never went back to the model whole.
    assert max(len(str(m["content"])) for m in script.seen[-1]) < 200_000

    subs = record.submissions
    assert [(s.counted, s.verdict is not None) for s in subs] == [(False, False), (False, False), (True, True)]
    assert "UTF-8" in subs[0].refused_reason and "limit" in subs[1].refused_reason
    assert subs[0].artifact_path is None and subs[2].artifact_path == "submissions/03.py"
    assert subs[2].verdict.tier in ("pass", "pass2x")
    assert record.final_verdict is not None and record.final_verdict.tier in ("pass", "pass2x")
    assert (tmp_path / "attempt" / "SKILL.md").read_text().startswith("# SKILL")
    assert len(record.llm_calls) == 7 and record.llm_calls[-1].purpose == "skill"


# -- the submission budget -------------------------------------------------------------------------------------
@pytest.mark.judge
def test_eleventh_submission_is_refused_and_kept_as_the_final_kernel(tmp_path, evaluator):
    replies = [kernel_reply(SYNTAX_ERROR + f"# try {i}\n") for i in range(10)]
    # After the first verdict SKILL.md is still empty: the agent asks for it before the second kernel.
    replies.insert(1, ScriptedReply("```skill\n- A syntax error is rejected before compiling (submission 1).\n```"))
    replies.append(kernel_reply(GOOD, skill="- Syntax errors cost ten submissions; the serial row loop is correct."))
    script = Recorder(replies)
    record = attempt(tmp_path, evaluator, script)  # the default budget: 10 judged submissions

    subs = record.submissions
    assert len(subs) == 11 and all(s.counted for s in subs[:10]) and not subs[10].counted
    assert all(s.verdict.rejected_by == "static" for s in subs[:10])
    assert subs[10].verdict is None and "submission budget is spent (10 of 10" in subs[10].refused_reason
    transcript = (tmp_path / "attempt" / "transcript.jsonl").read_text()
    assert "Submission 11 was NOT judged and does not count" in transcript  # the message to the model
    assert "SKILL.md is still empty" in script.feedback_after(1) and "SKILL.md saved" in script.feedback_after(2)
    assert "last judged submission" in script.feedback_after(11)
    assert record.stop_reason == "submissions" and record.status == "completed"
    # The refused kernel is the kernel on disk at the end: graded once more, it is the attempt's result.
    assert (tmp_path / "attempt" / "submissions" / "11.py").read_text().strip() == GOOD.strip()
    assert record.final_verdict is not None and record.final_verdict.tier in ("pass", "pass2x")
    # The last reply already updated SKILL.md as asked, so there is no extra closing turn.
    assert [c.purpose for c in record.llm_calls] == ["turn", "skill_checkpoint"] + ["turn"] * 10
    assert "serial row loop is correct" in (tmp_path / "attempt" / "SKILL.md").read_text()


# -- the wall clock --------------------------------------------------------------------------------------------
def test_no_turn_starts_that_would_eat_the_closing_skill_turn(tmp_path):
    """A slow model (3 s a call) on a 24 s budget: turns go on only while, after one more turn of the measured
    length, the closing reserve is still left, so the closing SKILL.md call always gets its time and succeeds —
    whatever the judge's speed. (With the old rule, remaining > reserve, a turn started with ~6 s left and the
    closing call timed out.) The judge here takes a fixed 0.5 s: the real one's checker start-up, charged to the
    attempt clock, varies with the machine's load, and so would the number of turns and the slack left."""
    skill = "# SKILL\n- A syntax error is rejected by the static checks before compiling."

    def model(messages: list[dict[str, Any]], index: int) -> ScriptedReply:
        asks_for_skill = "SKILL.md" in str(messages[-1]["content"]) and "```skill" in str(messages[-1]["content"])
        return ScriptedReply(f"```skill\n{skill} (call {index})\n```" if asks_for_skill else
                             f"```python\n{SYNTAX_ERROR}# call {index}\n```", delay_s=3.0)

    record = attempt(tmp_path, StaticRejections(judge_s=0.5), model, wall_clock_s=24)
    calls = record.llm_calls
    assert record.stop_reason == "wall_clock" and record.status == "completed"
    assert calls[-1].purpose == "skill" and calls[-1].ok, calls[-1].error
    assert f"(call {calls[-1].index})" in (tmp_path / "attempt" / "SKILL.md").read_text()
    assert all(c.ok for c in calls)  # no call was cut off by the clock
    assert record.attempt_clock_s <= 24


def test_a_turn_starts_only_if_the_reserve_is_left_after_it():
    now = [0.0]
    budget = Budget(BudgetSpec(wall_clock_s=100), clock=lambda: now[0])
    budget.start()
    assert budget.expected_turn_s() == 0 and budget.stop_reason(reserve_s=20) is None
    budget.start_turn()
    now[0] += 30  # the first turn (model call and judging) took 30 s
    budget.end_turn()
    assert budget.expected_turn_s() == 30 and budget.stop_reason(reserve_s=20) is None  # 70 - 30 > 20
    budget.start_turn()
    now[0] += 25
    budget.end_turn()
    # 45 s left, but one more 30 s turn would leave 15 < 20 for the closing turn.
    assert budget.remaining_s() == 45 and budget.stop_reason(reserve_s=20) == "wall_clock"
    assert budget.stop_reason(reserve_s=10) is None and budget.turn_durations_s == [30, 25]


@pytest.mark.judge
def test_tiny_wall_budget_stops_the_attempt(tmp_path, evaluator):
    script = Recorder([ScriptedReply("```python\n" + GOOD + "\n```", delay_s=30)] * 3)
    started = time.monotonic()
    record = attempt(tmp_path, evaluator, script, wall_clock_s=1.0)
    assert time.monotonic() - started < 15
    assert record.status == "completed" and record.stop_reason == "wall_clock"
    assert record.submissions == [] and record.final_verdict is None and record.final_kernel_path is None
    assert len(record.llm_calls) == 1 and not record.llm_calls[0].ok and "timeout" in record.llm_calls[0].error
    assert record.attempt_clock_s < 3


class QueuedEvaluator:
    """The real judge behind a queue: each submission first waits `wait_s` for a slot."""

    def __init__(self, inner: EvaluatorActor, wait_s: float) -> None:
        self.inner, self.wait_s = inner, wait_s

    async def evaluate(self, problem_id, kernel_source, dsl, preset=None, seed=None):
        await asyncio.sleep(self.wait_s)
        return await self.inner.evaluate(problem_id, kernel_source, dsl, preset, seed)


@pytest.mark.judge
@pytest.mark.parametrize("count_queue_wait", [False, True])
def test_queue_wait_pauses_the_attempt_clock_unless_counted(tmp_path, evaluator, count_queue_wait):
    script = Recorder([kernel_reply(SYNTAX_ERROR), ScriptedReply("```skill\n- a syntax error is caught early\n```")])
    client = LLMClient(big_context_spec(), script=script)
    config = make_config(tmp_path, max_turns=1, count_queue_wait=count_queue_wait)
    record = asyncio.run(run_attempt(config, client, QueuedEvaluator(evaluator, 1.5)))
    sub = record.submissions[0]
    assert sub.queue_wait_s >= 1.4 and sub.eval_s == sub.verdict.wall_s
    assert sub.round_trip_s == pytest.approx(sub.queue_wait_s + sub.eval_s, abs=1e-6)
    assert record.queue_wait_s == pytest.approx(sub.queue_wait_s)
    expected_clock = record.wall_s if count_queue_wait else record.wall_s - record.queue_wait_s
    # wall_s and attempt_clock_s come from two successive clock reads; a loaded machine can preempt the process
    # between them for a good part of a second (the 1.5 s queue wait is still told apart).
    assert record.attempt_clock_s == pytest.approx(expected_clock, abs=0.5)


def test_budget_bookkeeping_with_a_fake_clock():
    now = [100.0]
    budget = Budget(BudgetSpec(wall_clock_s=60, submissions=2, tokens=1000, max_turns=3), clock=lambda: now[0])
    budget.start()
    now[0] += 50
    assert budget.record_judged(round_trip_s=30, eval_s=10) == 20  # 20 s in the queue: not charged
    assert budget.elapsed_s() == 30 and budget.remaining_s() == 30 and budget.stop_reason() is None
    assert budget.stop_reason(reserve_s=30) == "wall_clock"
    budget.record_judged(1, 1)
    assert budget.submission_refusal() is not None and budget.submissions_left == 0
    budget.charge(LLMUsage(prompt_tokens=900, completion_tokens=100))
    assert budget.stop_reason() == "tokens"
    assert budget.kernel_refusal(b"\xff\xfe") is not None and budget.kernel_refusal("  \n") is not None
    assert budget.kernel_refusal("def solve(): pass") is None


@pytest.mark.judge
def test_context_window_errors_refit_the_conversation_then_stop_the_attempt(tmp_path, evaluator):
    too_long = ScriptedReply("litellm.ContextWindowExceededError")  # litellm's mock of a 'prompt too long' answer
    checkpoint = ScriptedReply("```skill\n- A syntax error is rejected before compiling.\n```")
    script = Recorder([too_long, kernel_reply(SYNTAX_ERROR), checkpoint, too_long, too_long, too_long])
    record = attempt(tmp_path, evaluator, script, max_turns=5)
    assert [(c.turn, c.purpose, c.ok) for c in record.llm_calls] == [
        (1, "turn", False), (1, "turn", True), (1, "skill_checkpoint", True), (2, "turn", False), (2, "turn", False),
        (2, "turn", False)]
    assert "context_window" in record.llm_calls[0].error and record.submissions[0].counted
    assert record.status == "completed" and record.stop_reason == "context_overflow"


# -- parsing and context -----------------------------------------------------------------------------------------
def test_reply_parsing_is_lenient_where_small_models_slip():
    text = ("Sure!\n```python\nimport torch\n```\nand the kernel:\n~~~\ndef solve(x):\n    return x\n~~~\n"
            "```skill\n- claim\n```\n```python\ndef solve(x, y):\n    return y")  # the last fence never closes
    blocks = fenced_blocks(text)
    assert [b.tag for b in blocks] == ["python", "", "skill", "python"] and not blocks[-1].closed
    assert pick_kernel(blocks) == "def solve(x, y):\n    return y"
    assert pick_skill(blocks, text) == "- claim"
    assert pick_kernel(fenced_blocks("```python\nx = 1\n```")) == "x = 1"
    assert pick_kernel(fenced_blocks("no code at all")) is None
    # The closing SKILL.md turn also takes a markdown block, or plain text when the reply has no block.
    assert pick_skill(fenced_blocks("```markdown\n# S\n```"), "", loose=True) == "# S"
    assert pick_skill([], "# Plain skill", loose=True) == "# Plain skill"
    assert pick_skill(fenced_blocks("```markdown\n# S\n```"), "") is None
    # Replies SmolLM2 sent to the closing request in CI (2026-12-02), with the opened ```skill fence prefilled: it
    # closed the fence at once and wrote on, in a ```skilling block or as prose. What it wrote is its SKILL.md.
    skilling = "```skill\n```\n\nHere's the finished SKILL.md:\n```skilling\nSKILL: \n### SKILL.SMART\n"
    assert pick_skill(fenced_blocks(skilling), skilling, loose=True) == "SKILL: \n### SKILL.SMART"
    assert pick_skill(fenced_blocks(skilling), skilling) is None
    prose = "```skill\n```\n\nWhat is the SKILL.md?\n\nPlease provide more information."
    assert (pick_skill(fenced_blocks(prose), prose, loose=True)
            == "What is the SKILL.md?\n\nPlease provide more information.")
    # Code is never a skill, and an empty fence alone leaves SKILL.md empty.
    code = "```skill\n```\n```python\ndef solve(x):\n    return x\n```"
    assert pick_skill(fenced_blocks(code), code, loose=True) is None
    assert pick_skill(fenced_blocks("```skill\n```"), "```skill\n```", loose=True) is None


def test_conversation_is_trimmed_to_the_context_in_whole_exchanges():
    head = [{"role": "system", "content": "s" * 300}, {"role": "user", "content": "t" * 300}]
    exchanges = []
    for i in range(10):
        exchanges += [{"role": "assistant", "content": f"reply {i} " + "r" * 3000},
                      {"role": "user", "content": f"verdict {i}"}]
    sent, max_tokens = fit_messages(head + exchanges, context_tokens=4000, reply_tokens=1024)
    assert sent[:2] == head  # system and task untouched (the server's prefix cache stays valid)
    assert sent[2]["role"] == "assistant" and sent[2]["content"].startswith("[")  # whole exchanges only
    assert "earlier exchange(s) omitted" in sent[2]["content"] and sent[-1]["content"] == "verdict 9"
    assert 256 <= max_tokens <= 1024
    with pytest.raises(AttemptStopped) as caught:
        fit_messages([{"role": "user", "content": "x" * 30_000}], context_tokens=4000, reply_tokens=512, head=1)
    assert caught.value.reason == "context_overflow"
