"""The chat agent, for models without tool calling: code in, verdict out.

Each reply's ```python block is the kernel (it is submitted, and the verdict report is the next user message); a
```skill block replaces SKILL.md, which is written to disk at once: the last good version is what is handed on.
SKILL.md is kept current through the attempt, not left to its end: a model that has not written one when its first
verdict comes back is asked for it then (one checkpoint request, between kernel turns); after the loop, one closing
turn asks for the final SKILL.md alone — the one thing a small model reliably does when asked plainly — which then
only refines it. A turn (or the checkpoint) starts only when the time it is expected to take, measured from this
attempt's own turns, still leaves the closing turn its reserve, so whether a skill exists does not depend on how
fast the machine is. Malformed replies (empty, no code block, oversized, text that is not UTF-8) cost a turn and
are answered with a plain message; nothing a model sends can crash the attempt.
"""
from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from typing import Any, Optional

from .context import (CHARS_PER_TOKEN, UNASKABLE_STOPS, AgentOutcome, AttemptContext, AttemptStopped, clean_text,
                      clip)
from .skill import SKILL_MAX_CHARS, render, render_section
from .skill_schema import skill_from_reply, skill_schema

log = logging.getLogger(__name__)

MESSAGES = "chat_messages.md"
KERNEL_TAGS = ("python", "py", "python3")
SKILL_TAGS = ("skill", "skill.md")
# The closing turn also accepts these, since small models label markdown as markdown.
LOOSE_SKILL_TAGS = SKILL_TAGS + ("markdown", "md")


@dataclass(frozen=True)
class Block:
    tag: str  # the info string's first word, lower-cased ('' when none)
    body: str
    closed: bool  # False: the reply ended inside the block (e.g. the model ran out of tokens)


@functools.lru_cache(maxsize=1)
def _markdown() -> Any:
    from markdown_it import MarkdownIt  # installed with rich; CommonMark fences, including unclosed ones

    return MarkdownIt("commonmark")


def fenced_blocks(text: str) -> list[Block]:
    """The fenced code blocks of a markdown text, in order (CommonMark rules: ``` or ~~~, up to three spaces of
    indentation, nested in lists or quotes too). An unclosed fence runs to the end of the text."""
    lines = text.split("\n")
    blocks: list[Block] = []
    for token in _markdown().parse(text):
        if token.type != "fence" or token.map is None:
            continue
        first, end = token.map
        last = lines[end - 1].strip() if end - 1 > first and end - 1 < len(lines) else ""
        closed = bool(last) and set(last) == {token.markup[0]} and len(last) >= len(token.markup)
        tag = token.info.split()[0].lower() if token.info.strip() else ""
        blocks.append(Block(tag=tag, body=token.content.removesuffix("\n"), closed=closed))
    return blocks


def pick_kernel(blocks: list[Block]) -> Optional[str]:
    """The kernel: the last block that defines solve() (python-tagged or not), else the last python block."""
    for block in reversed(blocks):
        if block.tag not in SKILL_TAGS and re.search(r"^\s*def\s+solve\s*\(", block.body, re.MULTILINE):
            return block.body
    for block in reversed(blocks):
        if block.tag in KERNEL_TAGS:
            return block.body
    return None


def pick_skill(blocks: list[Block], text: str, loose: bool = False) -> Optional[str]:
    """The SKILL.md in a reply: the last non-empty ```skill block. `loose` (a reply to a request for SKILL.md
    alone): also a markdown block or any block whose tag starts with "skill" (small models write ```skilling), and
    when no block holds anything, the reply's own text without its empty fences (a model that closes the opened
    fence at once and writes its notes after it)."""
    def wanted(tag: str) -> bool:
        return tag in SKILL_TAGS or (loose and (tag in LOOSE_SKILL_TAGS or tag.startswith("skill")))

    for block in reversed(blocks):
        if wanted(block.tag) and block.body.strip():
            return block.body.strip()
    if loose and not any(block.body.strip() for block in blocks):
        prose = re.sub(r"^[ \t]{0,3}(```+|~~~+)[^\n]*$", "", text, flags=re.MULTILINE).strip()
        return prose or None
    return None


class ChatAgent:
    """One chat attempt: see the module docstring. Built from an AttemptContext; `run()` never raises for anything
    the model does (infrastructure errors — the evaluator dying — propagate to the attempt runner)."""

    def __init__(self, ctx: AttemptContext) -> None:
        self.ctx = ctx
        spec = ctx.budget.spec
        self.reply_max_chars = 2 * spec.kernel_bytes + 100_000
        # A reply kept in the history takes at most about a third of the context (at least 4k, at most 60k
        # characters), so that the task and the latest exchange fit even a small model.
        context_chars = int(ctx.client.context_tokens * CHARS_PER_TOKEN)
        self.history_reply_chars = max(4_000, min(60_000, context_chars // 3))
        self.skill_md = ""
        self.skill_updated_turn = 0  # the turn whose reply last replaced SKILL.md
        self.checkpoint_asked = False  # the mid-attempt SKILL.md request was made (see _needs_checkpoint)
        self.kernel: Optional[str] = None
        self.messages: list[dict[str, Any]] = []

    def _say(self, section: str, **values: object) -> str:
        return render_section(MESSAGES, section, **values)

    def _opening(self, tag: str) -> Optional[str]:
        """The fence a reply starts with, for models the roster marks `open_fences` (too weak to open one
        themselves); None for everyone else."""
        return f"```{tag}\n" if getattr(self.ctx.client, "open_fences", False) else None

    @property
    def _constrained(self) -> bool:
        """SKILL.md turns decode to skill_schema's JSON (the roster's `skill_format: json_schema`)."""
        return getattr(self.ctx.client, "skill_format", "free") == "json_schema"

    async def _ask_skill(self, section: str, turn: int, purpose: str, **values: object) -> tuple[str, Optional[str]]:
        """Send a SKILL.md request (template `section`, or its `_json` twin under constrained decoding); returns the
        reply text and the SKILL.md found in it (None: none). Raises AttemptStopped as `ctx.complete` does."""
        request = self._say(section + ("_json" if self._constrained else ""), **values)
        self._append_user(request)
        self.ctx.transcript.message("user", request, purpose=purpose)
        if self._constrained:
            reply = await self.ctx.complete(self.messages, turn=turn, purpose=purpose, schema_for=skill_schema)
            return reply.content, skill_from_reply(reply.content)
        reply = await self.ctx.complete(self.messages, turn=turn, purpose=purpose, prefill=self._opening("skill"))
        return reply.content, pick_skill(fenced_blocks(reply.content), reply.content, loose=True)

    def _budget_status(self, turn: int) -> str:
        budget = self.ctx.budget
        max_turns = budget.spec.max_turns if budget.spec.max_turns is not None else "unlimited"
        return self._say("budget_status", submissions_left=budget.submissions_left,
                         minutes_left=f"{max(0.0, budget.remaining_s()) / 60:.0f}", turn=turn, max_turns=max_turns)

    def _set_skill(self, text: str) -> Optional[str]:
        """Replace SKILL.md; returns a message for the model when refused."""
        text = clean_text(text).strip()
        if len(text) > SKILL_MAX_CHARS:
            return self._say("skill_too_long", chars=f"{len(text):,}", limit=f"{SKILL_MAX_CHARS:,}")
        self.skill_md = text
        (self.ctx.out_dir / "SKILL.md").write_text(text + "\n" if text else "", encoding="utf-8")
        self.ctx.transcript.log("skill_update", chars=len(text))
        return None

    async def _handle(self, content: str) -> tuple[str, bool]:
        """React to one reply: returns the feedback for the model and whether a kernel was refused for budget."""
        if not content.strip():
            return self._say("empty"), False
        if len(content) > self.reply_max_chars:
            return self._say("too_long", chars=f"{len(content):,}", limit=f"{self.reply_max_chars:,}"), False
        blocks = fenced_blocks(content)
        notes: list[str] = []
        skill = pick_skill(blocks, content)
        if skill is not None:
            refusal = self._set_skill(skill)
            if refusal:
                notes.append(refusal)
            else:
                self.skill_updated_turn = self.ctx.budget.turns
        kernel = pick_kernel(blocks)
        if kernel is None:
            notes.append(self._say("skill_only") if skill is not None else self._say("no_code"))
            return "\n\n".join(notes), False
        if kernel.strip():
            kernel = kernel.rstrip("\n") + "\n"  # a source file ends with one newline, as editors write it
        outcome = await self.ctx.submit(kernel)
        refused_for_budget = not outcome.record.counted and outcome.record.kernel_sha256 is not None
        if outcome.record.kernel_sha256 is not None:  # valid text: it is now the kernel on disk
            self.kernel = kernel
        notes.insert(0, outcome.report)
        if refused_for_budget:
            notes.append(self._say("refused_final"))
        return "\n\n".join(notes), refused_for_budget

    def _remember(self, content: str, feedback: str) -> None:
        self.messages.append({"role": "assistant", "content": clip(clean_text(content), self.history_reply_chars)})
        self.messages.append({"role": "user", "content": feedback})
        self.ctx.transcript.message("user", feedback)

    async def run(self) -> AgentOutcome:
        ctx, budget = self.ctx, self.ctx.budget
        system = render("system.md") + "\n\n" + render("chat_protocol.md")
        self.messages = [{"role": "system", "content": system}, {"role": "user", "content": ctx.task.text}]
        ctx.transcript.message("system", system)
        ctx.transcript.message("user", ctx.task.text)
        stop: Optional[str] = None
        last_turn = False
        while stop is None:
            stop = budget.stop_reason(ctx.skill_reserve_s())
            if stop is not None:
                break
            turn = budget.start_turn()
            try:
                reply = await ctx.complete(self.messages, turn=turn, prefill=self._opening("python"))
            except AttemptStopped as stopped:
                stop = stopped.reason
                break
            feedback, refused_for_budget = await self._handle(reply.content)
            budget.end_turn()
            if last_turn or refused_for_budget:
                stop = "submissions"
            elif budget.spec.submissions and budget.submissions_left == 0:
                last_turn = True
                feedback += "\n\n" + self._say("last_submission")
            self._remember(reply.content, feedback + "\n\n" + self._budget_status(turn + 1))
            if stop is None and not last_turn and self._needs_checkpoint():
                stop = await self._skill_checkpoint(turn)
        # The last-turn message already asked for SKILL.md: a model that answered needs no second request.
        if not (last_turn and stop == "submissions" and self.skill_updated_turn == budget.turns):
            await self._closing_skill_turn(stop)
        ctx.transcript.log("stop", reason=stop)
        return AgentOutcome(stop_reason=stop, final_kernel=self.kernel, skill_md=self.skill_md)

    def _needs_checkpoint(self) -> bool:
        """SKILL.md is still empty although a verdict came back: ask for it now rather than only at the end, so
        that a skill exists (and is handed on) however the attempt ends. Once per attempt."""
        return (not self.skill_md and not self.checkpoint_asked
                and any(s.counted for s in self.ctx.submissions))

    async def _skill_checkpoint(self, turn: int) -> Optional[str]:
        """One SKILL.md request between kernel turns. It is started only when the closing reserve would still be
        left after it (as a turn is); returns a stop reason when the model could not be reached."""
        ctx = self.ctx
        self.checkpoint_asked = True
        if ctx.budget.stop_reason(ctx.skill_reserve_s()) is not None:
            return None  # no time for it: the closing turn asks instead
        before = list(self.messages)
        try:
            content, skill = await self._ask_skill("skill_checkpoint", turn, "skill_checkpoint")
        except AttemptStopped as stopped:
            self.messages = before  # the request stays unanswered; the closing turn asks again
            return stopped.reason if stopped.reason in UNASKABLE_STOPS else None
        refusal = self._set_skill(skill) if skill is not None else None
        if skill is not None and refusal is None:
            self.skill_updated_turn = turn
            follow = self._say("skill_saved")
        else:
            follow = refusal or self._say("skill_not_saved")
        self._remember(content, follow + "\n\n" + self._budget_status(turn + 1))
        return None

    def _append_user(self, text: str) -> None:
        """Add a user message; merged into the last one when that is a user message too (two user messages in a
        row confuse some chat templates)."""
        last = self.messages[-1]
        if last["role"] == "user":
            self.messages[-1] = {**last, "content": f"{last['content']}\n\n{text}"}
        else:
            self.messages.append({"role": "user", "content": text})

    async def _closing_skill_turn(self, stop: str) -> None:
        """Ask once for the final SKILL.md, unless the model cannot be asked any more."""
        if stop in UNASKABLE_STOPS or self.ctx.budget.remaining_s() <= 0:
            return
        why = {"submissions": "the submission budget is spent", "wall_clock": "the time budget is nearly spent",
               "max_turns": "the turn budget is spent"}.get(stop, stop)
        try:
            _, skill = await self._ask_skill("final_skill", self.ctx.budget.turns + 1, "skill", why=why)
        except AttemptStopped as stopped:
            log.info("no closing SKILL.md turn: %s", stopped)
            return
        if skill is not None and (refusal := self._set_skill(skill)):
            self.ctx.transcript.log("note", text=refusal)
