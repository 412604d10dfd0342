"""The LLM judge of failure attribution: a roster model reads a harmed cell-replicate's two transcripts and names
the cause, with a fixed, versioned prompt — the second pass beside the rules of `analysis/attribution.py`.

The system prompt is `prompts/attribute-<version>.md` as it is: it defines each cause of `attribution.CAUSES` for
a reader of transcripts (the rules' definitions, in words). Its sha256 is pinned in `PROMPT_SHA256`: editing the
file without adding a new version is refused at load, so the judge name `llm:<model>:v1` always means the same
words. The user message is the case (`attribution_case.render_case`: outcome, SKILL.md, each attempt's verdicts
and transcript), trimmed to what the model's context leaves (`case_tokens`); the rule pass's answer is never in it.

The model must reply `{"cause": <a cause name>, "evidence": "<short quote or reason>"}`. The first JSON object in
the reply is read (models wrap it in prose or ``` fences) and validated with pydantic; a spelling slip of the name
(`Search Truncation`, `search-truncation`) is forgiven, anything else is told to the model, which is asked again,
up to `max_retries` times. A case still without a valid answer, or whose call met an endpoint error, becomes an
`AttributionJudgement(status="unjudged", reason=...)`: `judge` never raises for what the model or the endpoint did.

`json_schema=True` also sends the reply's JSON schema as `response_format` (guided decoding on vLLM, structured
outputs on provider APIs) — for small models that do not keep to the format unaided; the judge is then named
`llm:<model>:<version>+schema`, so its judgements are kept apart. Measured 2026-12-01, SmolLM2-135M on vLLM 0.32's
CPU backend (`mkb serve smollm2 --backend vllm_subprocess`), 4 harmed cell-replicates with real transcripts: no
valid reply in 12 unaided (prose, or cut off at the token limit; ~10 min), 4 of 4 valid at the first reply with
`json_schema=True` (~1 min; the engine stayed up) — valid, though not right: it agreed with the rules on none.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..claims.llm_annotator import first_json_object
from ..llm import LLMCallError, LLMClient
from ..llm.prompts import load_pinned_prompt
from ..models.roster import ModelSpec, get_model
from ..records import LLMUsage
from .attribution import CAUSES, Cause
from .attribution_case import CHARS_PER_TOKEN, AttributionCase, render_case

log = logging.getLogger(__name__)

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"
# sha256 of each prompt template file as released: a changed file needs a new version (and a new entry here).
PROMPT_SHA256: dict[str, str] = {
    "v1": "27c7e571b34b2a8da6c082ed4011c0b006542d9ddf4fd498f79867af5545534c",
}
JUDGEMENT_SCHEMA_VERSION = 1
DEFAULT_CASE_TOKENS = 16_000   # the case's share of a large context; smaller contexts get what they leave
REPLY_TOKENS = 256             # one cause and a 40-word quote, with room for a model that adds some prose
EVIDENCE_CHARS = 600           # longer evidence is kept, clipped
# The JSON schema of a reply, sent as `response_format` when the judge constrains decoding.
REPLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"cause": {"type": "string", "enum": list(CAUSES)}, "evidence": {"type": "string"}},
    "required": ["cause", "evidence"], "additionalProperties": False}


def load_prompt_template(version: str) -> str:
    """The template text of `version`, checked against `PROMPT_SHA256`."""
    return load_pinned_prompt(PROMPT_DIR, "attribute", version, PROMPT_SHA256, "attribution")


class AttributionJudgement(BaseModel):
    """What one judge said of one harmed cell-replicate (one line of RUN/attribution/<judge>.jsonl).

    `status` 'unjudged' keeps the cell-replicate with the reason (no valid reply, or the endpoint failed), never
    drops it; its `cause` is None. A judged `cause` may be 'unattributed': the model found that none fits.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, protected_namespaces=())
    schema_version: int = JUDGEMENT_SCHEMA_VERSION
    model: str = Field(description="the cell's model (whose attempts are judged), not the judge's")
    target: str
    problem_id: str
    direction: str
    replicate: int
    base_trial: str
    skill_trial: str
    judge: str = Field(description="'llm:<roster model>:<prompt version>' (+schema: decoding was constrained)")
    prompt_sha256: str = Field(description="sha256 of the prompt template (PROMPT_SHA256[version])")
    case_sha256: str = Field(description="sha256 of the case as the model was sent it (the user message)")
    status: Literal["judged", "unjudged"] = "judged"
    cause: Optional[Cause] = None
    evidence: str = Field("", description="the model's quote or reason, clipped to EVIDENCE_CHARS")
    reason: str = Field("", description="why the cell-replicate is unjudged; empty otherwise")
    replies: int = Field(0, ge=0, description="model replies read (1 + retries after a malformed reply)")
    usage: list[LLMUsage] = Field(default_factory=list, description="one per model call")
    rule_cause: Optional[Cause] = Field(None, description="the rule pass's cause when this file was last written "
                                                          "(None: not a harm under that run's pairing; not compared)")
    rule_labels: Optional[str] = Field(None, description="'<annotator>@<taxonomy>' the rule pass read the source "
                                                         "SKILL.md's categories from (None: none annotated)")
    judged_at: str = ""

    @model_validator(mode="after")
    def _cause_iff_judged(self) -> "AttributionJudgement":
        if (self.cause is None) != (self.status == "unjudged"):
            raise ValueError("a judged record needs a cause, an unjudged one has none")
        return self

    @property
    def key(self) -> tuple[str, str, str, str, int]:
        """(model, target, problem, direction, replicate): the cell-replicate judged."""
        return (self.model, self.target, self.problem_id, self.direction, self.replicate)


class _Reply(BaseModel):
    """The model's answer; extra keys (a "confidence", say) are ignored."""

    model_config = ConfigDict(extra="ignore")
    cause: Cause
    evidence: str = Field(min_length=1)

    @field_validator("cause", mode="before")
    @classmethod
    def _normalise(cls, value: Any) -> Any:
        """`Search Truncation`, ` search-truncation ` → `search_truncation`: a spelling slip is not worth a retry."""
        if isinstance(value, str):
            return "_".join(value.strip().strip("`'\"").lower().replace("-", " ").split())
        return value

    @field_validator("evidence", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            value = " ".join(str(v) for v in value)
        return " ".join(value.split()) if isinstance(value, str) else value


def parse_reply(content: str, truncated: bool = False) -> Union[_Reply, str]:
    """The validated answer in `content`, or what was wrong with it (for the model to hear)."""
    cut = " (the reply was cut off at the token limit: send only the JSON object)" if truncated else ""
    data = first_json_object(content)
    if data is None:
        return f"the reply contains no JSON object{cut}"
    try:
        return _Reply.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "reply"
        if where == "cause" and "cause" in data:
            return f"cause {str(data['cause'])[:80]!r} is not one of: {', '.join(CAUSES)}"
        return f'{where}: {first["msg"]} (the object needs "cause" and "evidence"){cut}'


def _feedback(problem: str) -> str:
    return (f"Your reply could not be used: {problem}.\n\nReply again with one JSON object and nothing else: "
            f'{{"cause": "<one of: {", ".join(CAUSES)}>", "evidence": "<short quote or reason>"}}')


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class LLMAttributionJudge:
    """The cause of a harmed cell-replicate from a roster model.

    `model`: an `LLMClient` (tests pass a scripted one), a roster `ModelSpec`, or a roster name (with `api_base`
    for one of our vLLM servers). `max_retries`: how many times a malformed reply is answered with what was wrong
    (the client retries transient endpoint failures on its own; an endpoint error ends the case). `case_tokens`:
    the most the case may take (default DEFAULT_CASE_TOKENS), lowered to what the model's context leaves beside
    the system prompt, the reply and one retry.
    """

    def __init__(self, model: Union[LLMClient, ModelSpec, str], *, prompt_version: str = "v1", max_retries: int = 2,
                 api_base: Optional[str] = None, temperature: float = 0.0, seed: Optional[int] = 0,
                 max_tokens: Optional[int] = None, timeout_s: Optional[float] = None,
                 case_tokens: Optional[int] = None, json_schema: bool = False) -> None:
        if max_retries < 0 or (case_tokens is not None and case_tokens < 500):
            raise ValueError("max_retries must be >= 0 and case_tokens >= 500")
        if isinstance(model, str):
            model = get_model(model)
        self.client = model if isinstance(model, LLMClient) else LLMClient(model, api_base)
        self.prompt_version = prompt_version
        self.system_prompt = load_prompt_template(prompt_version)
        self.prompt_sha256 = PROMPT_SHA256[prompt_version]
        self.max_retries = max_retries
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens or min(REPLY_TOKENS, self.client.max_output_tokens or REPLY_TOKENS)
        self.timeout_s = timeout_s
        self.json_schema = json_schema
        system_tokens = int(len(self.system_prompt) / CHARS_PER_TOKEN) + 1
        room = self.client.context_tokens - system_tokens - 2 * self.max_tokens - 400   # a retry's turn, framing
        self.case_tokens = max(min(case_tokens or DEFAULT_CASE_TOKENS, room), 500)

    @property
    def name(self) -> str:
        return f"llm:{self.client.name}:{self.prompt_version}" + ("+schema" if self.json_schema else "")

    def judge(self, case: AttributionCase) -> AttributionJudgement:
        """The judgement of one case (from synchronous code; inside an event loop await `ajudge`)."""
        return asyncio.run(self.ajudge(case))

    async def ajudge(self, case: AttributionCase) -> AttributionJudgement:
        text = render_case(case, self.case_tokens)
        request = [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": text}]
        messages = list(request)
        usage: list[LLMUsage] = []
        problem = ""
        replies = 0
        extra: dict[str, Any] = {}
        if self.json_schema:
            extra["response_format"] = {"type": "json_schema",
                                        "json_schema": {"name": "attribution", "schema": REPLY_SCHEMA}}
        while replies <= self.max_retries:
            try:
                reply = await self.client.complete(messages, max_tokens=self.max_tokens, temperature=self.temperature,
                                                   seed=self.seed, timeout_s=self.timeout_s, **extra)
            except LLMCallError as error:
                problem = f"LLM call {replies + 1} failed ({error.kind}): {str(error)[:300]}"
                log.warning("judge %s: %s", self.name, problem)
                return self._record(case, text, None, problem, replies, usage)
            replies += 1
            usage.append(reply.usage)
            parsed = parse_reply(reply.content, truncated=reply.finish_reason == "length")
            if isinstance(parsed, _Reply):
                return self._record(case, text, parsed, "", replies, usage)
            problem = parsed
            if replies <= self.max_retries:
                # Only the latest exchange is kept: the context stays bounded however many retries there are.
                messages = [*request, reply.as_message(), {"role": "user", "content": _feedback(problem)}]
        reason = f"no valid answer after {replies} replies; last problem: {problem}"
        log.warning("judge %s: %s r%d unjudged (%s)", self.name, case.cr.cell_key, case.cr.replicate, reason)
        return self._record(case, text, None, reason, replies, usage)

    def _record(self, case: AttributionCase, text: str, answer: Optional[_Reply], reason: str, replies: int,
                usage: list[LLMUsage]) -> AttributionJudgement:
        cr = case.cr
        evidence = ""
        if answer is not None:
            evidence = answer.evidence if len(answer.evidence) <= EVIDENCE_CHARS else \
                answer.evidence[:EVIDENCE_CHARS - 3] + "..."
        return AttributionJudgement(
            model=cr.model, target=cr.target, problem_id=cr.problem_id, direction=cr.direction,
            replicate=cr.replicate, base_trial=case.base.attempt.trial_id, skill_trial=case.skill.attempt.trial_id,
            judge=self.name, prompt_sha256=self.prompt_sha256,
            case_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
            status="judged" if answer is not None else "unjudged", cause=answer.cause if answer else None,
            evidence=evidence, reason=reason, replies=replies, usage=usage, rule_cause=case.rule_cause,
            judged_at=_now())
