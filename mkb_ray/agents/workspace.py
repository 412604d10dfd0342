"""The workspace agent (comparable to MetaKernelBench's terminal agent): a directory and four tools.

The attempt gets `<out_dir>/workspace/` holding TASK.md, the reference file, CONTRACT.md, docs/<dsl>.md, an empty
kernel.py and SKILL.md (plus SOURCE_SKILL.md on the skill arm). The model acts only through tool calls: `shell`
(bash in the bubblewrap sandbox of `sandbox.py`), `write_file` (also carried out inside the sandbox, so a symlink
planted in the workspace cannot make us write elsewhere), `submit` (kernel.py through the attempt's evaluator
port) and `finish`. The kernel.py and SKILL.md on disk when the loop ends are the attempt's final kernel and skill;
the host reads them without following links.

Every reply is one turn. A reply without a tool call, a call to an unknown tool or with bad arguments costs its
turn and is answered with a message saying what to send instead; nothing the model sends can crash the attempt.
After the last judged submission the model gets a few grace turns to leave its final kernel and SKILL.md. Every
verdict that finds SKILL.md still empty says so (the file is what is handed on, so it should be current before the
end); if it is still empty when the loop ends, one closing turn asks for it. A turn starts only when the time it
is expected to take (this attempt's slowest turn) still leaves the closing turn its reserve.
"""
from __future__ import annotations

import logging
import shlex
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from ..llm.client import LLMReply, ToolCall
from .chat import fenced_blocks, pick_skill
from .context import UNASKABLE_STOPS, AgentOutcome, AttemptContext, AttemptStopped, clean_text, clip
from .sandbox import (SandboxLimits, SandboxPolicy, WorkspaceFileError, bwrap_path, default_policy,
                      prepare_workspace, read_workspace_file, run_sandboxed)
from .skill import SKILL_MAX_CHARS, render, render_section
from .tools import (TOOL_NAMES, FinishArgs, ShellArgs, SubmitArgs, ToolCallProblem, WriteFileArgs,
                    compact_arguments, format_shell_result, parse_tool_call, say, tool_schemas)

log = logging.getLogger(__name__)

DOCS_DIR = Path(__file__).resolve().parent / "docs"
# Tool calls carried out per reply; more are answered "not run" (a model looping on calls still pays turns).
MAX_CALLS_PER_REPLY = 8
# Turns the model keeps after its last judged submission, to leave kernel.py and SKILL.md in order.
GRACE_TURNS = 3
# How the protocol names each DSL's docs (the task statement's own heading uses mkb_ray.agents.run_attempt.DSL_NAMES).
DSL_DOC_NAMES = {"tirx": "TIRx", "cutedsl": "CuTe DSL"}
# Host-side read cap for kernel.py. Up to it, an oversized kernel is refused with its exact size; beyond it the
# file is not read whole (and the refusal reports the cap).
KERNEL_READ_CAP_BYTES = 16 << 20


class WorkspaceAgent:
    """One workspace attempt (see the module docstring). Built from an AttemptContext; `run()` never raises for
    anything the model does. A machine without bubblewrap raises `SandboxUnavailable` before the first turn."""

    def __init__(self, ctx: AttemptContext, policy: Optional[SandboxPolicy] = None,
                 tool_choice: Union[str, Sequence[str]] = "auto") -> None:
        self.ctx = ctx
        self.policy = policy or default_policy()
        # One value for every turn, or one per turn (the last repeats): "auto", "required", "none" or a tool name,
        # which forces that tool (a named tool choice). A per-turn sequence lets a model too weak to pick tools
        # be walked through write_file → submit → shell while it still writes every argument itself.
        self.tool_choices = [tool_choice] if isinstance(tool_choice, str) else list(tool_choice)
        if not self.tool_choices:
            raise ValueError("tool_choice needs at least one value")
        self.workspace = Path(ctx.out_dir) / "workspace"
        context_chars = int(ctx.client.context_tokens * 3)
        # One tool result may take about a third of the context of a small model, at most 24k characters.
        self.result_chars = max(2_000, min(24_000, context_chars // 3))
        self.history_reply_chars = max(2_000, min(60_000, context_chars // 3))
        self.write_max_chars = 2 * ctx.budget.spec.kernel_bytes + SKILL_MAX_CHARS
        self.messages: list[dict[str, Any]] = []
        self.finished = False
        self.grace_turns: Optional[int] = None  # counts down after the last judged submission
        self.stop_after_turn: Optional[str] = None
        self.notes: list[str] = []

    # -- set-up -------------------------------------------------------------------------------------------------
    def _setup_workspace(self) -> None:
        task, ws = self.ctx.task, self.workspace
        (ws / "docs").mkdir(parents=True, exist_ok=True)
        docs_file = DOCS_DIR / task.docs_filename
        # The full docs on disk even when the task statement had to clip them for a small context.
        docs = docs_file.read_text(encoding="utf-8") if docs_file.exists() else task.docs_text
        files = {"TASK.md": self._task_text(), task.reference_filename: task.reference_source,
                 "CONTRACT.md": task.contract_text, f"docs/{task.docs_filename}": docs, "kernel.py": "",
                 "SKILL.md": ""}
        if task.source_skill:
            files["SOURCE_SKILL.md"] = task.source_skill
        for name, text in files.items():
            (ws / name).write_text(text.rstrip() + "\n" if text else "", encoding="utf-8")
        prepare_workspace(ws, self.policy)

    def _task_text(self) -> str:
        task = self.ctx.task
        run_note = say("run_cpu") if task.target == "cpu" else say("run_gpu")
        source_note = "\n\n" + say("source_skill_note") if task.source_skill else ""
        protocol = say("protocol", reference_filename=task.reference_filename, docs_filename=task.docs_filename,
                       dsl_name=DSL_DOC_NAMES.get(task.dsl, task.dsl), run_note=run_note,
                       timeout_s=f"{self.policy.limits.wall_timeout_s:.0f}", source_skill_note=source_note)
        return f"{task.text}\n\n{protocol}"

    # -- the loop -----------------------------------------------------------------------------------------------
    async def run(self) -> AgentOutcome:
        ctx, budget = self.ctx, self.ctx.budget
        bwrap_path()  # fail before the first turn on a machine without bubblewrap
        if not getattr(ctx.client, "supports_tools", True):
            log.warning("model %s is not marked supports_tools in the roster; the workspace agent needs tool "
                        "calls (the chat agent does not)", ctx.client.name)
        self._setup_workspace()
        system = render("system.md")
        task_text = (self.workspace / "TASK.md").read_text(encoding="utf-8")
        self.messages = [{"role": "system", "content": system}, {"role": "user", "content": task_text}]
        ctx.transcript.message("system", system)
        ctx.transcript.message("user", task_text)
        tools = tool_schemas(self.policy.limits.wall_timeout_s)
        stop: Optional[str] = None
        while stop is None:
            stop = budget.stop_reason(ctx.skill_reserve_s())
            if stop is not None:
                break
            turn = budget.start_turn()
            try:
                reply = await ctx.complete(self.messages, turn=turn, tools=tools, tool_choice=self._tool_choice(turn))
            except AttemptStopped as stopped:
                stop = stopped.reason
                break
            await self._handle(reply, turn)
            budget.end_turn()
            if self.finished:
                stop = "finished"
            elif self.stop_after_turn:
                stop = self.stop_after_turn
        if not self._skill_text():
            await self._closing_skill_turn(stop)
        ctx.transcript.log("stop", reason=stop)
        skill = self._skill_text()
        return AgentOutcome(stop_reason=stop, final_kernel=self._final_kernel(), skill_md=skill, notes=self.notes)

    async def _handle(self, reply: LLMReply, turn: int) -> None:
        """Carry out one reply's tool calls and append the exchange to the conversation."""
        calls = reply.tool_calls
        assistant: dict[str, Any] = {"role": "assistant",
                                     "content": clip(clean_text(reply.content), self.history_reply_chars)}
        if calls:
            assistant["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": compact_arguments(c, self.result_chars)}}
                for c in calls]
        self.messages.append(assistant)
        status = self._budget_status(turn + 1)
        if not calls:
            feedback = say("no_tool_call") + "\n\n" + status
            self.messages.append({"role": "user", "content": feedback})
            self.ctx.transcript.message("user", feedback)
            self._count_grace_turn()
            return
        results = []
        for position, call in enumerate(calls):
            if self.finished:
                text = say("after_finish")
            elif position >= MAX_CALLS_PER_REPLY:
                text = say("too_many_calls", limit=MAX_CALLS_PER_REPLY)
            else:
                text = await self._run_call(call, turn)
            results.append(text)
        results[-1] = f"{results[-1]}\n\n{status}"
        for call, text in zip(calls, results):
            self.messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        self._count_grace_turn()

    async def _run_call(self, call: ToolCall, turn: int) -> str:
        parsed = parse_tool_call(call)
        if isinstance(parsed, ToolCallProblem):
            text = parsed.message
        elif isinstance(parsed, ShellArgs):
            text = await self._shell(parsed.command)
        elif isinstance(parsed, WriteFileArgs):
            text = await self._write_file(parsed.path, parsed.content)
        elif isinstance(parsed, SubmitArgs):
            text = await self._submit()
        else:
            assert isinstance(parsed, FinishArgs)
            self.finished = True
            text = say("finished")
        text = clip(clean_text(text), self.result_chars)
        self.ctx.transcript.log("tool", turn=turn, call_id=call.id, name=call.name,
                                arguments=clip(clean_text(call.arguments), 4000), result=text,
                                malformed=isinstance(parsed, ToolCallProblem))
        return text

    # -- the tools ----------------------------------------------------------------------------------------------
    def _command_policy(self) -> SandboxPolicy:
        """The sandbox policy for one command: its wall timeout never outlasts the attempt's wall clock."""
        limits = self.policy.limits
        timeout_s = max(1.0, min(limits.wall_timeout_s, self.ctx.budget.remaining_s()))
        if timeout_s == limits.wall_timeout_s:
            return self.policy
        return self.policy.model_copy(update={"limits": SandboxLimits(**{**limits.model_dump(),
                                                                        "wall_timeout_s": timeout_s})})

    async def _shell(self, command: str) -> str:
        result = await run_sandboxed(command, self.workspace, self._command_policy())
        return format_shell_result(result)

    async def _write_file(self, path: str, content: str) -> str:
        if len(content) > self.write_max_chars:
            return say("write_too_big", chars=f"{len(content):,}", limit=f"{self.write_max_chars:,}")
        data = clean_text(content).encode("utf-8")
        quoted = shlex.quote(path)
        # Written by the sandboxed uid inside the sandbox: a link in the workspace cannot redirect the write.
        command = f"mkdir -p -- \"$(dirname -- {quoted})\" && cat > {quoted}"
        result = await run_sandboxed(command, self.workspace, self._command_policy(), stdin_bytes=data)
        if result.exit_code != 0:
            return say("write_failed", path=path, error=(result.stderr or format_shell_result(result)).strip())
        return say("written", bytes=len(data), path=path)

    async def _submit(self) -> str:
        budget = self.ctx.budget
        cap = max(KERNEL_READ_CAP_BYTES, budget.spec.kernel_bytes)
        try:
            kernel = read_workspace_file(self.workspace, "kernel.py", cap)
        except WorkspaceFileError as err:
            return say("kernel_unreadable", error=str(err))
        outcome = await self.ctx.submit(kernel.data)
        report = outcome.report
        if not outcome.record.counted and outcome.record.kernel_sha256 is not None:
            # A valid kernel refused because the budget is spent: nothing more can be judged.
            self.stop_after_turn = "submissions"
        elif outcome.record.counted and budget.spec.submissions and budget.submissions_left == 0:
            self.grace_turns = GRACE_TURNS
            report += "\n\n" + say("last_submission", grace=GRACE_TURNS)
        if outcome.record.counted and self._skill_is_empty():
            report += "\n\n" + say("skill_reminder")
        return report

    # -- bookkeeping ------------------------------------------------------------------------------------------
    def _tool_choice(self, turn: int, closing: bool = False) -> Union[str, dict[str, Any]]:
        """The tool_choice of `turn` (1-based). The closing SKILL.md turn forces write_file when the turns were
        forced to a tool at all (anything but auto/none), since that is the one tool it can use."""
        choice = self.tool_choices[min(turn, len(self.tool_choices)) - 1]
        if closing and choice not in ("auto", "none"):
            choice = "write_file"
        if choice in TOOL_NAMES:
            return {"type": "function", "function": {"name": choice}}
        return choice

    def _count_grace_turn(self) -> None:
        if self.grace_turns is None:
            return
        if self.grace_turns <= 0:
            self.stop_after_turn = "submissions"
        self.grace_turns -= 1

    def _budget_status(self, turn: int) -> str:
        budget = self.ctx.budget
        max_turns = budget.spec.max_turns if budget.spec.max_turns is not None else "unlimited"
        return render_section("chat_messages.md", "budget_status", submissions_left=budget.submissions_left,
                              minutes_left=f"{max(0.0, budget.remaining_s()) / 60:.0f}", turn=turn,
                              max_turns=max_turns).strip()

    def _skill_is_empty(self) -> bool:
        """Whether SKILL.md holds nothing yet, read mid-attempt without notes (an unreadable file counts as empty;
        `_skill_text` says why when the attempt ends)."""
        try:
            return not read_workspace_file(self.workspace, "SKILL.md", SKILL_MAX_CHARS * 4).data.strip()
        except WorkspaceFileError:
            return True

    def _skill_text(self) -> str:
        try:
            skill = read_workspace_file(self.workspace, "SKILL.md", SKILL_MAX_CHARS * 4)
        except WorkspaceFileError as err:
            self._note(f"SKILL.md unreadable at the end: {err}")
            return ""
        text = clean_text(skill.data.decode("utf-8", "replace")).strip()
        if len(text) > SKILL_MAX_CHARS:
            self._note(f"SKILL.md clipped from {len(text):,} to {SKILL_MAX_CHARS:,} characters")
            text = text[:SKILL_MAX_CHARS]
        return text

    def _final_kernel(self) -> Optional[str]:
        """kernel.py as left on disk, or None when there is nothing that could be judged."""
        try:
            kernel = read_workspace_file(self.workspace, "kernel.py", self.ctx.budget.spec.kernel_bytes)
        except WorkspaceFileError as err:
            self._note(f"no final kernel: {err}")
            return None
        refusal = self.ctx.budget.kernel_refusal(kernel.data)
        if refusal is not None:
            self._note(f"no final kernel: {refusal}")
            return None
        return kernel.data.decode("utf-8")

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)
            self.ctx.transcript.log("note", text=text)

    async def _closing_skill_turn(self, stop: Optional[str]) -> None:
        """Ask once for SKILL.md (it is empty), unless the model cannot be asked any more. Both a write_file call
        and a ```skill block in the reply are accepted; no other tool runs."""
        if stop in UNASKABLE_STOPS or self.ctx.budget.remaining_s() <= 0:
            return
        why = {"submissions": "the submission budget is spent", "wall_clock": "the time budget is nearly spent",
               "max_turns": "the turn budget is spent", "finished": "you called finish"}.get(stop or "", stop)
        request = say("final_skill", why=why)
        self.messages.append({"role": "user", "content": request})
        self.ctx.transcript.message("user", request, purpose="skill")
        try:
            reply = await self.ctx.complete(self.messages, turn=self.ctx.budget.turns + 1, purpose="skill",
                                            tools=tool_schemas(self.policy.limits.wall_timeout_s, skill_only=True),
                                            tool_choice=self._tool_choice(self.ctx.budget.turns + 1, closing=True))
        except AttemptStopped as stopped:
            log.info("no closing SKILL.md turn: %s", stopped)
            return
        for call in reply.tool_calls:
            parsed = parse_tool_call(call)
            if isinstance(parsed, WriteFileArgs) and parsed.path == "SKILL.md":
                await self._write_file(parsed.path, parsed.content)
                return
        skill = pick_skill(fenced_blocks(reply.content), reply.content, loose=True)
        if skill:
            await self._write_file("SKILL.md", skill)


def make_workspace_agent(ctx: AttemptContext) -> WorkspaceAgent:
    """The factory `mkb_ray.agents.run_attempt.run_attempt` uses for agent 'workspace'."""
    return WorkspaceAgent(ctx)
