"""What every agent gets from the attempt runner: the task, the model, the budget and the judge, behind two calls.

`AttemptContext.complete()` is the only way an agent talks to the model (it bounds the call by the wall budget,
charges tokens, records the call and writes the transcript); `AttemptContext.submit()` is the only way it gets a
kernel judged (size/UTF-8/budget refusals that do not count, queue-wait accounting, artifacts on disk, the report
the model reads). An agent is anything with `async run() -> AgentOutcome`, built from a context.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Protocol, Union

from ..llm.client import LLMCallError, LLMClient, LLMReply
from ..records import AttemptConfig, LLMCallRecord, LLMUsage, SubmissionRecord, Verdict
from .budget import Budget
from .evaluator_port import EvaluatorPort

log = logging.getLogger(__name__)

# Characters of one message kept in the transcript (a 10 MB reply is recorded by size and hash, not kept whole).
TRANSCRIPT_MESSAGE_CHARS = 200_000
# Rough characters per token, on the safe side for code; used only to keep conversations inside the context.
CHARS_PER_TOKEN = 3.0
# The smallest reply worth asking for; below it the conversation is trimmed (or the attempt stops).
MIN_REPLY_TOKENS = 256
# Shares of the model's context tried in turn when the server reports the prompt as too long.
CONTEXT_SHARES = (1.0, 0.75, 0.5)
_CONTEXT_ERROR = re.compile(r"context|max_tokens|maximum .*length|too long", re.IGNORECASE)


def _is_context_error(err: LLMCallError) -> bool:
    """litellm maps most 'prompt too long' answers to ContextWindowExceededError; vLLM's answer to a prompt plus
    max_tokens over max_model_len can arrive as a plain 400."""
    return err.kind == "context_window" or (err.kind == "bad_request" and bool(_CONTEXT_ERROR.search(str(err))))


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def clean_text(text: str) -> str:
    """Text safe to send back to a model or to write as UTF-8: unencodable characters become U+FFFD."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def clip(text: str, limit_chars: int) -> str:
    """Head and tail of a long text, with how much was cut in between."""
    if len(text) <= limit_chars:
        return text
    head = limit_chars * 2 // 3
    tail = limit_chars - head
    return f"{text[:head]}\n[... {len(text) - limit_chars:,} characters omitted ...]\n{text[-tail:]}"


@dataclass(frozen=True)
class TaskStatement:
    """The task as the agent sees it. `text` is the whole statement (the chat agent's first user message, the
    workspace agent's TASK.md); the parts are there for agents that lay them out as files."""

    problem_id: str
    description: str
    dsl: str
    target: str
    reference_filename: str
    reference_source: str
    contract_text: str
    docs_filename: str
    docs_text: str
    skill_instructions: str
    source_skill: Optional[str]  # the skill arm: the fixed header plus the source SKILL.md; None for solo
    text: str


# Stop reasons after which the model cannot be asked anything more (not even for SKILL.md).
UNASKABLE_STOPS = ("llm_error", "context_overflow", "tokens")


class AttemptStopped(Exception):
    """The attempt cannot go on: `reason` is a records.StopReason."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass
class SubmissionOutcome:
    record: SubmissionRecord
    report: str  # what the model is told

    @property
    def verdict(self) -> Optional[Verdict]:
        return self.record.verdict


@dataclass
class AgentOutcome:
    """What an agent hands back: why it stopped, the kernel on disk at the end and its SKILL.md."""

    stop_reason: str
    final_kernel: Optional[str]
    skill_md: str
    error: Optional[str] = None
    notes: list[str] = field(default_factory=list)


class Agent(Protocol):
    async def run(self) -> AgentOutcome: ...


AgentFactory = Callable[["AttemptContext"], Agent]


class Transcript:
    """Append-only JSONL: one event per line, each with UTC time and attempt-clock time."""

    def __init__(self, path: Path, clock: Callable[[], float]) -> None:
        self.path = path
        self._clock = clock
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")

    def log(self, event_type: str, **fields: Any) -> None:
        event = {"ts": utc_now(), "clock_s": round(self._clock(), 3), "event": event_type, **fields}
        self._file.write(json.dumps(event, default=str, ensure_ascii=False) + "\n")
        self._file.flush()

    def message(self, role: str, content: str, **fields: Any) -> None:
        text = clean_text(content)
        extra: dict[str, Any] = {}
        if len(text) > TRANSCRIPT_MESSAGE_CHARS:
            extra = {"chars": len(text), "sha256": hashlib.sha256(text.encode()).hexdigest(), "clipped": True}
            text = clip(text, TRANSCRIPT_MESSAGE_CHARS)
        self.log("message", role=role, content=text, **extra, **fields)

    def close(self) -> None:
        self._file.close()


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    chars = 0
    for message in messages:
        chars += len(str(message.get("content") or ""))
        for call in message.get("tool_calls") or []:
            chars += len(json.dumps(call))
    return int(chars / CHARS_PER_TOKEN) + 8 * len(messages)


def fit_messages(messages: list[dict[str, Any]], context_tokens: int, reply_tokens: int,
                 head: int = 2) -> tuple[list[dict[str, Any]], int]:
    """Keep the first `head` messages (system + task) and the newest exchanges that fit in the context with room
    for a reply; returns the messages to send and the reply's max_tokens. Exchanges are dropped whole (an
    assistant message with the tool results or feedback that follow it), so tool calls never lose their results.
    Raises AttemptStopped('context_overflow') when even the head leaves no room for a reply."""
    fixed, rest = messages[:head], messages[head:]
    groups: list[list[dict[str, Any]]] = []
    for message in rest:
        if message.get("role") == "assistant" or not groups:
            groups.append([message])
        else:
            groups[-1].append(message)
    kept = list(groups)
    while True:
        candidate = fixed + [m for g in kept for m in g]
        room = context_tokens - estimate_tokens(candidate)
        if room >= MIN_REPLY_TOKENS or not kept:
            break
        kept.pop(0)
    if room < MIN_REPLY_TOKENS:
        raise AttemptStopped("context_overflow", f"the task statement alone needs ~{estimate_tokens(fixed)} of "
                                                 f"the model's {context_tokens} context tokens")
    if len(kept) < len(groups) and kept:
        # The note goes on the first kept message, not on the task: an unchanged head keeps the server's prefix
        # cache of the (long) task statement valid from call to call.
        dropped = len(groups) - len(kept)
        first = kept[0][0]
        note = f"[{dropped} earlier exchange(s) omitted to fit the model's context]\n"
        kept[0] = [{**first, "content": note + str(first.get("content") or "")}] + kept[0][1:]
        candidate = fixed + [m for g in kept for m in g]
        room = context_tokens - estimate_tokens(candidate)
    return candidate, max(1, min(reply_tokens, room))


def format_report(record: SubmissionRecord, budget: Budget) -> str:
    """The verdict as the model reads it."""
    left = budget.submissions_left
    if record.verdict is None:
        return (f"Submission {record.index} was NOT judged and does not count: {record.refused_reason}. "
                f"Judged submissions left: {left}.")
    v = record.verdict
    failed_check = f" (failed check: {v.rejected_by})" if v.rejected_by else ""
    lines = [f"Submission {record.index} judged ({budget.counted_submissions} of {budget.spec.submissions} used, "
             f"{left} left). Verdict: {v.tier.upper()}{failed_check}",
             f"Reason: {clip(v.reason, 3000)}"]
    facts = [f"compiled: {'yes' if v.compiled else 'no'}"]
    if v.correct is not None:
        facts.append(f"correct: {'yes' if v.correct else 'no'}")
    if v.kernel_ms is not None:
        facts.append(f"kernel {v.kernel_ms:.4g} ms")
    if v.eager_ms is not None:
        facts.append(f"eager PyTorch {v.eager_ms:.4g} ms")
    if v.speedup is not None:
        facts.append(f"speedup {v.speedup:.3g}x")
    if v.target:
        facts.append(f"target {v.target}, {v.device} ({v.preset} shapes)")
    lines.append(", ".join(facts))
    failed = [c for c in v.checks if not c.passed]
    if failed:
        lines.append("First failed check: " + clip(f"{failed[0].name}: {failed[0].detail}", 2000))
    if v.log_tail.strip():
        lines.append("Last output of the judging process:\n" + clip(v.log_tail.strip(), 1500))
    return "\n".join(lines)


# The closing SKILL.md turn's share of the wall clock (see AttemptContext.skill_reserve_s).
SKILL_RESERVE_FRACTION = 0.1
SKILL_RESERVE_MAX_S = 300.0


class AttemptContext:
    """The runtime of one attempt, shared by the attempt runner and the agent it runs."""

    def __init__(self, config: AttemptConfig, client: LLMClient, evaluator: EvaluatorPort, budget: Budget,
                 task: TaskStatement, out_dir: Path, transcript: Transcript) -> None:
        self.config = config
        self.client = client
        self.evaluator = evaluator
        self.budget = budget
        self.task = task
        self.out_dir = out_dir
        self.transcript = transcript
        self.llm_calls: list[LLMCallRecord] = []
        self.submissions: list[SubmissionRecord] = []
        (out_dir / "submissions").mkdir(parents=True, exist_ok=True)

    def skill_reserve_s(self) -> float:
        """Wall time to hold back for the closing SKILL.md turn: a tenth of the budget (at most 5 min), or — when
        this attempt's calls have been slower (a loaded CPU server) — 1.25 x its slowest successful call, so the
        skill can still be asked for; never more than half the budget."""
        wall_s = self.budget.spec.wall_clock_s
        slowest = max((c.usage.latency_s for c in self.llm_calls if c.ok), default=0.0)
        return min(0.5 * wall_s, max(min(SKILL_RESERVE_MAX_S, SKILL_RESERVE_FRACTION * wall_s), 1.25 * slowest))

    # -- the model ---------------------------------------------------------------------------------------------
    async def complete(self, messages: list[dict[str, Any]], *, turn: int, purpose: str = "turn",
                       tools: Optional[list[dict[str, Any]]] = None,
                       tool_choice: Optional[Union[str, dict[str, Any]]] = None, head: int = 2,
                       prefill: Optional[str] = None,
                       schema_for: Optional[Callable[[int], dict[str, Any]]] = None) -> LLMReply:
        """One model call inside the budget. The conversation is trimmed to the model's context (see
        `fit_messages`); the call may last at most the wall time left. Raises AttemptStopped with reason
        wall_clock / tokens / llm_error / context_overflow. `schema_for(max_tokens)`: the `response_format` to
        decode to, sized to the call's reply cap (mkb_ray/agents/skill_schema.py); recorded as `constrained`."""
        budget = self.budget
        if budget.remaining_s() <= 0:
            raise AttemptStopped("wall_clock")
        reply_tokens = budget.spec.reply_max_tokens
        if self.client.max_output_tokens:
            reply_tokens = min(reply_tokens, self.client.max_output_tokens)
        tokens_left = budget.tokens_left()
        if tokens_left is not None:
            if tokens_left <= 0:
                raise AttemptStopped("tokens")
            reply_tokens = min(reply_tokens, tokens_left)
        # Token counts are estimated (no tokenizer for API models): when the server still says the prompt is too
        # long, the conversation is refitted to a smaller share of the context and tried again.
        for share in CONTEXT_SHARES:
            sent, max_tokens = fit_messages(messages, int(self.client.context_tokens * share), reply_tokens,
                                            head=head)
            started_at, clock_s = utc_now(), budget.elapsed_s()
            index = len(self.llm_calls)
            response_format = schema_for(max_tokens) if schema_for is not None else None
            constrained = response_format["json_schema"]["name"] if response_format is not None else None
            try:
                reply = await self.client.complete(sent, tools=tools, tool_choice=tool_choice,
                                                   max_tokens=max_tokens, timeout_s=budget.remaining_s(),
                                                   seed=self.config.seed, prefill=prefill,
                                                   response_format=response_format)
                break
            except LLMCallError as err:
                self.llm_calls.append(LLMCallRecord(
                    index=index, turn=turn, purpose=purpose, started_at=started_at, attempt_clock_s=clock_s,
                    ok=False, error=str(err)[:4000], max_tokens=max_tokens, constrained=constrained,
                    usage=LLMUsage(latency_s=err.latency_s, retries=max(0, err.attempts - 1))))
                self.transcript.log("llm_error", turn=turn, purpose=purpose, error_kind=err.kind,
                                    error=str(err)[:4000])
                if budget.remaining_s() <= 0:
                    raise AttemptStopped("wall_clock", "the model call ran past the wall-clock budget") from err
                if not _is_context_error(err):
                    raise AttemptStopped("llm_error", str(err)[:2000]) from err
                if share == CONTEXT_SHARES[-1]:
                    raise AttemptStopped("context_overflow", str(err)[:500]) from err
        budget.charge(reply.usage)
        self.llm_calls.append(LLMCallRecord(
            index=index, turn=turn, purpose=purpose, started_at=started_at, attempt_clock_s=clock_s, ok=True,
            finish_reason=reply.finish_reason, reply_chars=len(reply.content), tool_calls=len(reply.tool_calls),
            max_tokens=max_tokens, constrained=constrained, usage=reply.usage))
        self.transcript.message("assistant", reply.content, turn=turn, purpose=purpose,
                                tool_calls=[c.__dict__ for c in reply.tool_calls] or None,
                                finish_reason=reply.finish_reason)
        return reply

    # -- the judge ---------------------------------------------------------------------------------------------
    async def submit(self, source: Any) -> SubmissionOutcome:
        """Submit one kernel. Sources that cannot be judged (empty, not UTF-8, too big) and submissions past the
        budget are refused without counting; everything is recorded and written under submissions/."""
        budget = self.budget
        index = len(self.submissions) + 1
        base = dict(index=index, submitted_at=utc_now(), attempt_clock_s=budget.elapsed_s())
        refusal = budget.kernel_refusal(source)
        text: Optional[str] = None
        if refusal is None:
            text = source.decode("utf-8") if isinstance(source, bytes) else source
            refusal = budget.submission_refusal()
        if refusal is not None:
            record = SubmissionRecord(counted=False, refused_reason=refusal, **base)
            if text is not None:  # a valid kernel refused for budget: keep the file, it may be the final kernel
                record = record.model_copy(update=self._write_kernel(index, text))
        else:
            assert text is not None
            artifact = self._write_kernel(index, text)
            started = time.monotonic()
            raw = await self.evaluator.evaluate(self.config.problem_id, text, self.config.dsl)
            round_trip_s = time.monotonic() - started
            verdict = Verdict.model_validate(raw)
            queue_wait_s = budget.record_judged(round_trip_s, verdict.wall_s)
            verdict_path = f"submissions/{index:02d}.verdict.json"
            (self.out_dir / verdict_path).write_text(verdict.model_dump_json(indent=2))
            record = SubmissionRecord(counted=True, verdict=verdict, verdict_path=verdict_path,
                                      round_trip_s=round_trip_s, eval_s=verdict.wall_s, queue_wait_s=queue_wait_s,
                                      **artifact, **base)
        self.submissions.append(record)
        report = format_report(record, budget)
        self.transcript.log("submission", index=index, counted=record.counted, refused_reason=record.refused_reason,
                            tier=record.verdict.tier if record.verdict else None,
                            reason=record.verdict.reason if record.verdict else None,
                            queue_wait_s=record.queue_wait_s, eval_s=record.eval_s)
        return SubmissionOutcome(record=record, report=report)

    def _write_kernel(self, index: int, text: str) -> dict[str, Any]:
        data = text.encode("utf-8")
        path = f"submissions/{index:02d}.py"
        (self.out_dir / path).write_bytes(data)
        return {"kernel_sha256": hashlib.sha256(data).hexdigest(), "kernel_bytes": len(data), "artifact_path": path}
