"""The workspace agent's tools: their schemas (OpenAI function-calling format), the checking of the calls a model
makes, and every text the model reads about them.

A call is checked before anything runs: unknown tool, arguments that are not a JSON object, missing or mistyped
arguments each give a `ToolCallProblem` whose message tells the model what to send instead.

The model-facing texts are in mkb_ray/agents/templates/workspace_messages.md (`<!-- name -->` sections with
`$name` placeholders), so `template_hash()`, stamped on every record, covers them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional, Union

from ..llm.client import ToolCall
from .context import clean_text
from .sandbox import SandboxResult
from .skill import render_section

TOOL_NAMES = ("shell", "write_file", "submit", "finish")
# A command travels as one argv string (Linux caps one at 128 KiB); long content belongs in write_file.
MAX_COMMAND_CHARS = 100_000

MESSAGES = "workspace_messages.md"  # in mkb_ray/agents/templates/, so template_hash() covers them


def say(section: str, **values: object) -> str:
    """One model-facing message with its $placeholders filled (a missing value raises KeyError)."""
    return render_section(MESSAGES, section, **values).strip("\n")


def tool_schemas(shell_timeout_s: float, skill_only: bool = False) -> list[dict[str, Any]]:
    """The four tools in OpenAI function-calling format. `skill_only` (the closing SKILL.md turn): write_file
    alone, its path fixed to SKILL.md — a server that enforces the schema (vLLM with a forced tool) then cannot
    write anywhere else."""

    def function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": name, "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(properties),
                           "additionalProperties": False}}}

    if skill_only:
        return [function("write_file", "Write the whole SKILL.md in /workspace, replacing it.",
                         {"path": {"type": "string", "enum": ["SKILL.md"], "description": "SKILL.md"},
                          "content": {"type": "string", "description": "the complete SKILL.md"}})]
    return [
        function("shell", f"Run a bash command in /workspace (fresh shell each call, no network, no GPU, "
                          f"{shell_timeout_s:.0f} s limit). Returns the exit code, stdout and stderr.",
                 {"command": {"type": "string", "description": "the bash command line"}}),
        function("write_file", "Write a whole text file in /workspace, replacing it if it exists.",
                 {"path": {"type": "string", "description": "path relative to /workspace, e.g. kernel.py"},
                  "content": {"type": "string", "description": "the complete file content"}}),
        function("submit", "Judge /workspace/kernel.py now (one of your limited submissions); returns the verdict.",
                 {}),
        function("finish", "End the attempt. The kernel.py on disk is graded once more as the final result.", {}),
    ]


_EXAMPLES = {"shell": '{"command": "ls -la"}', "write_file": '{"path": "kernel.py", "content": "..."}',
             "submit": "{}", "finish": "{}"}


@dataclass(frozen=True)
class ShellArgs:
    command: str


@dataclass(frozen=True)
class WriteFileArgs:
    path: str  # normalised: relative to the workspace, no '..'
    content: str


@dataclass(frozen=True)
class SubmitArgs:
    pass


@dataclass(frozen=True)
class FinishArgs:
    pass


ToolArgs = Union[ShellArgs, WriteFileArgs, SubmitArgs, FinishArgs]


@dataclass(frozen=True)
class ToolCallProblem:
    """A call that was not carried out, with the message for the model."""

    message: str


def _workspace_path(raw: str) -> Optional[str]:
    """`raw` as a path relative to the workspace, or None when it points outside (absolute elsewhere, '..')."""
    path = raw.strip()
    if path.startswith("/workspace/"):
        path = path[len("/workspace/"):]
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or path.startswith("/") or ".." in parts or "\x00" in path or len(path) > 1000:
        return None
    return "/".join(parts)


def parse_tool_call(call: ToolCall) -> Union[ToolArgs, ToolCallProblem]:
    """Check one tool call; nothing runs here."""
    name = call.name
    if name not in TOOL_NAMES:
        return ToolCallProblem(say("unknown_tool", name=name[:100]))
    example = _EXAMPLES[name]
    raw = call.arguments.strip()
    if raw in ("", "null") and name in ("submit", "finish"):
        raw = "{}"
    try:
        args = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as err:
        return ToolCallProblem(say("bad_json", tool=name, error=str(err)[:200], example=example))
    if not isinstance(args, dict):
        return ToolCallProblem(say("bad_json", tool=name, error=f"got a JSON {type(args).__name__}",
                                   example=example))
    if name == "submit":
        return SubmitArgs()
    if name == "finish":
        return FinishArgs()
    if name == "shell":
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            return ToolCallProblem(say("bad_args", tool=name, error="'command' must be a non-empty string",
                                       example=example))
        if len(command) > MAX_COMMAND_CHARS or "\x00" in command:
            return ToolCallProblem(say("bad_args", tool=name, error=f"the command is longer than "
                                       f"{MAX_COMMAND_CHARS:,} characters or contains a NUL character (write long "
                                       f"content with write_file)", example=example))
        return ShellArgs(command=clean_text(command))
    path, content = args.get("path"), args.get("content")
    if not isinstance(path, str) or not isinstance(content, str):
        return ToolCallProblem(say("bad_args", tool=name, error="'path' and 'content' must both be strings",
                                   example=example))
    relative = _workspace_path(path)
    if relative is None:
        return ToolCallProblem(say("bad_args", tool=name, error=f"path {path[:200]!r} is outside /workspace",
                                   example=example))
    return WriteFileArgs(path=clean_text(relative), content=content)


def format_shell_result(result: SandboxResult) -> str:
    """The shell tool's answer as the model reads it."""
    status = f"exit code {result.exit_code}"
    if result.killed_for == "timeout":
        status += f" (killed: the command ran past its time limit, {result.wall_s:.0f} s)"
    elif result.killed_for == "cpu_limit":
        status += " (killed: CPU-time limit)"
    elif result.killed_for == "output_limit":
        status += " (killed: it printed too much output)"
    parts = [status]
    for label, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        if text:
            parts.append(f"--- {label} ---\n{text.rstrip()}")
    if len(parts) == 1:
        parts.append("(no output)")
    return "\n".join(parts)


def compact_arguments(call: ToolCall, limit_chars: int) -> str:
    """The call's arguments as kept in the conversation history: a long write_file content is replaced by a note
    (the file is on disk; re-sending it every turn would fill a small model's context)."""
    if len(call.arguments) <= limit_chars:
        return call.arguments
    try:
        args = json.loads(call.arguments)
    except (json.JSONDecodeError, RecursionError):
        args = None
    if isinstance(args, dict) and isinstance(args.get("content"), str):
        content = args["content"]
        args["content"] = f"[{len(content):,} characters; see the file in the workspace]"
        return json.dumps(args)
    return json.dumps({"omitted": f"{len(call.arguments):,} characters of arguments"})
