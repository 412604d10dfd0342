"""The workspace agent's tools: their schemas (OpenAI function-calling format), the checking of the calls a model
makes, and every text the model reads about them.

A call is checked before anything runs: unknown tool, arguments that are not a JSON object, missing or mistyped
arguments each give a `ToolCallProblem` whose message tells the model what to send instead.

The model-facing texts are in `WORKSPACE_MESSAGES` in the `<!-- name -->` section format of
mkb_ray/agents/templates/ (and `$name` placeholders), ready to move into that directory so that `template_hash()`
covers them too.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from string import Template
from typing import Any, Optional, Union

from ..llm.client import ToolCall
from .context import clean_text
from .sandbox import SandboxResult

TOOL_NAMES = ("shell", "write_file", "submit", "finish")
# A command travels as one argv string (Linux caps one at 128 KiB); long content belongs in write_file.
MAX_COMMAND_CHARS = 100_000

WORKSPACE_MESSAGES = """\
<!-- protocol -->
## How you work
You work in a directory, /workspace, through tool calls. It holds:
- TASK.md: this task statement;
- $reference_filename: the reference implementation;
- CONTRACT.md: the grading contract;
- docs/$docs_filename: the $dsl_name documentation;
- kernel.py: your kernel, empty at the start. `submit` judges this file, and the kernel.py on disk when the
  attempt ends is graded once more: that verdict is the result of the attempt;
- SKILL.md: your SKILL.md (instructions above), read from disk when the attempt ends.$source_skill_note

Tools:
- shell(command): runs `command` with bash in /workspace and returns its exit code and output. Every call starts
  a fresh shell (cd and variables do not carry over; background processes end with the call). There is no network
  and no GPU; python has torch, numpy and the DSL installed. $run_note Each command may run $timeout_s s; long
  output is cut to its beginning and end.
- write_file(path, content): writes a whole file in the workspace (for example kernel.py or SKILL.md).
- submit(): judges kernel.py now and returns the verdict.
- finish(): ends the attempt. Call it when you are done.
Act through tool calls in every reply; text without a tool call does nothing.
<!-- source_skill_note -->

SOURCE_SKILL.md holds the SKILL.md handed over from the earlier attempt (also shown above); your own SKILL.md
starts empty.
<!-- run_cpu -->
You can compile your kernel and run it on CPU tensors at the small test shapes before you submit.
<!-- run_gpu -->
You can compile your kernel here (with CPU tensors standing in for GPU ones) but not run it: only the judge runs
GPU kernels.
<!-- no_tool_call -->
Your reply made no tool call, so nothing happened (this turn still counted). Act through the tools: shell,
write_file, submit, finish.
<!-- bad_json -->
The arguments of $tool are not a valid JSON object ($error); nothing was run. Send them like $example.
<!-- bad_args -->
$tool: $error; nothing was run. Send the arguments like $example.
<!-- unknown_tool -->
There is no tool called '$name'; nothing was run. The tools are shell, write_file, submit and finish.
<!-- too_many_calls -->
Not run: at most $limit tool calls are carried out per reply.
<!-- after_finish -->
Not run: finish was called earlier in this reply.
<!-- write_too_big -->
Nothing was written: the content is $chars characters, over write_file's limit of $limit.
<!-- written -->
Wrote $bytes bytes to $path.
<!-- write_failed -->
Could not write $path: $error
<!-- kernel_unreadable -->
Nothing was submitted and nothing counted: $error. kernel.py must be a plain file (not a link) in /workspace.
<!-- last_submission -->
That was your last judged submission. You have $grace more turn(s) to leave your final kernel.py (graded once
more at the end: the result of this attempt) and to update SKILL.md; then call finish.
<!-- finished -->
Finished. The kernel.py on disk is graded once more now.
<!-- final_skill -->
The attempt is over ($why) and SKILL.md is still empty. Write it now, following the SKILL.md instructions in
TASK.md: call write_file with path SKILL.md, or reply with the whole SKILL.md in one fenced block that starts with
```skill and ends with ```. No kernel code.
"""

_SECTION = re.compile(r"^<!-- ([a-z_]+) -->\n", re.MULTILINE)


def _sections(text: str) -> dict[str, str]:
    parts = _SECTION.split(text)
    return {parts[i]: parts[i + 1].rstrip("\n") for i in range(1, len(parts) - 1, 2)}


_MESSAGES = _sections(WORKSPACE_MESSAGES)


def say(section: str, **values: object) -> str:
    """One model-facing message with its $placeholders filled (a missing value raises KeyError)."""
    return Template(_MESSAGES[section]).substitute({k: str(v) for k, v in values.items()}).strip("\n")


def tool_schemas(shell_timeout_s: float) -> list[dict[str, Any]]:
    """The four tools in OpenAI function-calling format."""

    def function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": name, "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(properties),
                           "additionalProperties": False}}}

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
