"""The LLM annotator: a roster model labels each claim's category and modality with a fixed, versioned prompt.

The system prompt is `prompts/annotate-<version>.md` with the taxonomy's categories (definitions and examples)
filled in, so a user's taxonomy file changes what the model is told. The template's sha256 is pinned in
`PROMPT_SHA256` (v1: `PROMPT_SHA256["v1"]`): editing the file without adding a new version is refused at load, so an
annotator name `llm:<model>:v1` always means the same words. The rendered prompt's hash (which also covers the
taxonomy) is `LLMAnnotator.system_prompt_sha256`.

Claims go to the model in numbered batches; it must reply `{"annotations": [{"index": i, "category": ..., "modality":
...}, ...]}`. The first JSON object in the reply is read (models wrap it in prose or ``` fences) and each entry is
validated with pydantic: the category must be one of the taxonomy's names, the modality one of hedged / plain /
absolute, every index present once. Valid entries are kept; for the rest the model is told what was wrong and asked
again, up to `max_retries` times. A claim still without a valid label, or whose batch met an endpoint error, becomes
an `AnnotationRecord(status="unannotated", reason=...)`: the output always has one record per input claim, in order.

Support is never asked of the model: it comes from the attempt's graded submissions (`claims.support.judge_support`),
for every claim, annotated or not.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from ..llm import LLMCallError, LLMClient
from ..llm.prompts import PromptError, load_pinned_prompt  # noqa: F401  (PromptError: callers catch it from here)
from ..models.roster import ModelSpec, get_model
from ..records import LLMUsage
from ..records.claims import MODALITIES, AnnotationRecord, ClaimRecord, EvidenceItem, Modality
from .support import judge_support
from .taxonomy import Taxonomy

log = logging.getLogger(__name__)

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"
# sha256 of each prompt template file as released: a changed file needs a new version (and a new entry here).
PROMPT_SHA256: dict[str, str] = {
    "v1": "fe315d151027145d1589262531aa4c07e0aea129301fa974dc3fad811bfcc182",
}
# Room for one reply entry (`{"index": 12, "category": "bounded_failure_diagnosis", "modality": "hedged"}`, ~30
# tokens) with slack for a model that adds a field or some prose.
_TOKENS_PER_CLAIM = 48
_TOKENS_OVERHEAD = 256


def load_prompt_template(version: str) -> str:
    """The template text of `version`, checked against `PROMPT_SHA256`."""
    return load_pinned_prompt(PROMPT_DIR, "annotate", version, PROMPT_SHA256, "annotation")


def render_categories(taxonomy: Taxonomy) -> str:
    """The taxonomy as the model reads it: each name with its definition and examples."""
    blocks = []
    for category in taxonomy.categories:
        examples = "\n".join(f"  - example: {json.dumps(example, ensure_ascii=False)}" for example in category.examples)
        blocks.append(f"- {category.name}: {' '.join(category.definition.split())}\n{examples}")
    return "\n".join(blocks)


def render_system_prompt(taxonomy: Taxonomy, version: str = "v1") -> str:
    return string.Template(load_prompt_template(version)).substitute(
        taxonomy_ref=taxonomy.ref, categories=render_categories(taxonomy))


def render_batch(claims: Sequence[ClaimRecord], numbers: Sequence[int]) -> str:
    """Numbered claims, one a line, each with the heading it sat under when it had one."""
    lines = []
    for number, claim in zip(numbers, claims):
        text = " ".join(claim.text.split())
        heading = f' (under the heading "{claim.section}")' if claim.section else ""
        lines.append(f"{number}. {text}{heading}")
    return "\n".join(lines)


# --- reading a reply ----------------------------------------------------------------------------------------------

class _Entry(BaseModel):
    """One entry of the model's reply; extra keys (a model's "reason", say) are ignored."""

    model_config = ConfigDict(extra="ignore")
    index: int
    category: str
    modality: Modality

    @field_validator("category", "modality", mode="before")
    @classmethod
    def _normalise(cls, value: Any) -> Any:
        """`Open Question`, ` open-question ` → `open_question`: a spelling slip is not worth a retry."""
        if isinstance(value, str):
            return "_".join(value.strip().lower().replace("-", " ").split())
        return value


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore")
    annotations: list[Any]


@dataclass
class ParsedReply:
    """What could be read from one reply: valid labels by claim number, and a problem for every other number."""

    labels: dict[int, _Entry] = field(default_factory=dict)
    problems: dict[int, str] = field(default_factory=dict)
    general: list[str] = field(default_factory=list)  # problems not tied to one claim (no JSON, stray indices)


def first_json_object(text: str) -> Optional[dict[str, Any]]:
    """The first `{...}` in `text` that parses as a JSON object (prose and ``` fences around it are skipped)."""
    decoder = json.JSONDecoder()
    position = text.find("{")
    while position != -1:
        try:
            value, _ = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            return value
        position = text.find("{", position + 1)
    return None


def _entry_problem(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "entry"
    return f"{where}: {first['msg']}"


def parse_reply(content: str, numbers: Sequence[int], taxonomy: Taxonomy,
                truncated: bool = False) -> ParsedReply:
    """Validate a reply against the claims it should label (`numbers`, as they were numbered for the model)."""
    parsed = ParsedReply()
    wanted = set(numbers)
    cut = " (the reply was cut off at the token limit: send only the JSON object)" if truncated else ""
    data = first_json_object(content)
    if data is None:
        problem = f"the reply contains no JSON object{cut}"
        parsed.general.append(problem)
        parsed.problems = {n: problem for n in numbers}
        return parsed
    try:
        reply = _Reply.model_validate(data)
    except ValidationError:
        problem = f'the JSON object has no "annotations" list{cut}'
        parsed.general.append(problem)
        parsed.problems = {n: problem for n in numbers}
        return parsed
    seen: dict[int, int] = {}
    for raw in reply.annotations:
        try:
            entry = _Entry.model_validate(raw)
        except ValidationError as error:
            index = raw.get("index") if isinstance(raw, dict) else None
            problem = f"entry {json.dumps(raw, ensure_ascii=False)[:200]}: {_entry_problem(error)}"
            if isinstance(index, int) and index in wanted:
                parsed.problems.setdefault(index, problem)
            else:
                parsed.general.append(problem)
            continue
        if entry.index not in wanted:
            parsed.general.append(f"index {entry.index} is not one of the claims asked for")
            continue
        seen[entry.index] = seen.get(entry.index, 0) + 1
        if entry.category not in taxonomy.names:
            parsed.problems.setdefault(
                entry.index, f"index {entry.index}: category {entry.category!r} is not a name of taxonomy "
                             f"{taxonomy.ref}")
            continue
        previous = parsed.labels.get(entry.index)
        if previous is not None and (previous.category, previous.modality) != (entry.category, entry.modality):
            parsed.problems[entry.index] = f"index {entry.index} appears more than once, with different labels"
            continue
        parsed.labels[entry.index] = entry
    for number in numbers:
        if number in parsed.problems:
            parsed.labels.pop(number, None)
        elif number not in parsed.labels:
            parsed.problems[number] = f"index {number} is missing from the reply{cut}"
    return parsed


def _feedback(parsed: ParsedReply, pending: Sequence[int], claims: dict[int, ClaimRecord]) -> str:
    problems = list(dict.fromkeys([*parsed.general, *(parsed.problems[n] for n in pending)]))
    listed = "\n".join(f"- {p}" for p in problems[:20])
    more = f"\n- ... and {len(problems) - 20} more" if len(problems) > 20 else ""
    return (f"Your reply could not be used:\n{listed}{more}\n\nReply again with one JSON object, "
            f'{{"annotations": [...]}}, for these claims only (keep their numbers; categories must be names from '
            f'the list; modality one of {", ".join(MODALITIES)}):\n'
            f"{render_batch([claims[n] for n in pending], pending)}")


# --- the annotator ------------------------------------------------------------------------------------------------

class LLMAnnotator:
    """Category and modality from a roster model; support from the attempt's evidence.

    `model`: an `LLMClient` (tests pass a scripted one), a roster `ModelSpec`, or a roster name (with `api_base`
    for one of our vLLM servers). The annotator's name is `llm:<roster model>:<prompt version>`.
    `max_retries`: how many times a batch's still-unlabelled claims are asked again after a malformed reply
    (the client retries transient endpoint failures on its own; an endpoint error ends the batch).
    """

    def __init__(self, model: Union[LLMClient, ModelSpec, str], taxonomy: Taxonomy, *, prompt_version: str = "v1",
                 batch_size: int = 20, max_retries: int = 2, api_base: Optional[str] = None,
                 temperature: float = 0.0, seed: Optional[int] = 0, max_tokens: Optional[int] = None,
                 timeout_s: Optional[float] = None) -> None:
        if batch_size < 1 or max_retries < 0:
            raise ValueError("batch_size must be >= 1 and max_retries >= 0")
        if isinstance(model, str):
            model = get_model(model)
        self.client = model if isinstance(model, LLMClient) else LLMClient(model, api_base)
        self.taxonomy = taxonomy
        self.prompt_version = prompt_version
        self.system_prompt = render_system_prompt(taxonomy, prompt_version)
        self.system_prompt_sha256 = hashlib.sha256(self.system_prompt.encode("utf-8")).hexdigest()
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.usage: list[LLMUsage] = []  # one per model call of the last annotate()

    @property
    def name(self) -> str:
        return f"llm:{self.client.name}:{self.prompt_version}"

    def annotate(self, claims: Sequence[ClaimRecord], evidence: Sequence[EvidenceItem]) -> list[AnnotationRecord]:
        """One record per claim, in order (from synchronous code; inside an event loop await `aannotate`)."""
        return asyncio.run(self.aannotate(claims, evidence))

    async def aannotate(self, claims: Sequence[ClaimRecord],
                        evidence: Sequence[EvidenceItem]) -> list[AnnotationRecord]:
        self.usage = []
        labels: list[Union[_Entry, str]] = []
        for start in range(0, len(claims), self.batch_size):
            labels.extend(await self._annotate_batch(claims[start:start + self.batch_size]))
        return [self._record(claim, label, evidence) for claim, label in zip(claims, labels)]

    def _record(self, claim: ClaimRecord, label: Union[_Entry, str],
                evidence: Sequence[EvidenceItem]) -> AnnotationRecord:
        judgement = judge_support(claim.text, evidence)
        common = dict(claim_id=claim.claim_id, annotator=self.name, taxonomy=self.taxonomy.ref,
                      support=judgement.support, support_reason=judgement.reason)
        if isinstance(label, str):
            return AnnotationRecord(status="unannotated", reason=label, **common)
        return AnnotationRecord(category=label.category, modality=label.modality, **common)

    async def _annotate_batch(self, batch: Sequence[ClaimRecord]) -> list[Union[_Entry, str]]:
        """A label or, for a claim that got none, the reason; in the batch's order."""
        numbers = list(range(1, len(batch) + 1))
        by_number = dict(zip(numbers, batch))
        request = [{"role": "system", "content": self.system_prompt},
                   {"role": "user", "content": f"Claims:\n{render_batch(batch, numbers)}"}]
        messages = list(request)
        labels: dict[int, _Entry] = {}
        reasons: dict[int, str] = {}
        pending = numbers
        replies = 0
        while pending and replies <= self.max_retries:
            cap = _TOKENS_OVERHEAD + _TOKENS_PER_CLAIM * len(pending)
            max_tokens = self.max_tokens or min(cap, self.client.max_output_tokens or cap)
            try:
                reply = await self.client.complete(messages, max_tokens=max_tokens, temperature=self.temperature,
                                                   seed=self.seed, timeout_s=self.timeout_s)
            except LLMCallError as error:
                problem = f"LLM call {replies + 1} failed ({error.kind}): {str(error)[:300]}"
                log.warning("annotator %s: %s; %d claims left unannotated", self.name, problem, len(pending))
                reasons.update({n: problem for n in pending})
                break
            replies += 1
            self.usage.append(reply.usage)
            parsed = parse_reply(reply.content, pending, self.taxonomy, truncated=reply.finish_reason == "length")
            labels.update(parsed.labels)
            pending = [n for n in pending if n not in parsed.labels]
            reasons = {n: f"no valid label after {replies} replies; last problem: {parsed.problems[n]}"
                       for n in pending}
            if pending and replies <= self.max_retries:
                # Only the latest exchange is kept: the context stays bounded however many retries there are.
                messages = [*request, reply.as_message(), {"role": "user",
                                                           "content": _feedback(parsed, pending, by_number)}]
        if reasons:
            log.warning("annotator %s: %d of %d claims unannotated (%s)", self.name, len(reasons), len(batch),
                        next(iter(reasons.values())))
        return [labels[n] if n in labels else reasons[n] for n in numbers]
