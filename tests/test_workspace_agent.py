"""The workspace agent's tool-call plumbing: a scripted model (a real LLMClient answering through litellm's
mock_response / mock_tool_calls) acting through shell / write_file / submit / finish in the bubblewrap sandbox,
with the real judge on the CPU TIRx variant."""
from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mkb_ray.actors.evaluator import EvaluatorActor
from mkb_ray.agents.sandbox import default_policy, prepare_workspace, run_sandboxed
from mkb_ray.agents.tools import (FinishArgs, ShellArgs, SubmitArgs, ToolCallProblem, WriteFileArgs,
                                  compact_arguments, parse_tool_call)
from mkb_ray.agents.workspace import DOCS_DIR
from mkb_ray.agents.run_attempt import run_attempt
from mkb_ray.judge import JudgeOptions
from mkb_ray.llm import LLMClient, ScriptedReply, ToolCall
from mkb_ray.records import AttemptConfig, BudgetSpec

from scripted_llm import Recorder

from conftest import EXAMPLE_PROBLEM, REPO

SOLUTION = REPO / "problems" / "mlp_norm" / "solutions" / "01_fused_add_rmsnorm.tirx_cpu.py"
GOOD = SOLUTION.read_text()
# Rejected by the static checks inside the judging process: the quickest real verdict.
SYNTAX_ERROR = "import torch\n\ndef solve(x, residual, weight):\n    return x +\n"
SKILL = "# SKILL\n- One serial pass per row was correct on the CPU target (submission 1 passed)."
# Runs the kernel inside the sandbox at the smoke shape and checks it against the reference there.
SELF_CHECK = ("python -c \"import torch, kernel, importlib.util as u; "
              "s = u.spec_from_file_location('ref', '01_fused_add_rmsnorm.py'); r = u.module_from_spec(s); "
              "s.loader.exec_module(r); x, res, w = (torch.randn(16, 512, dtype=torch.bfloat16), "
              "torch.randn(16, 512, dtype=torch.bfloat16), torch.ones(512, dtype=torch.bfloat16)); "
              "print('max_err', (kernel.solve(x, res, w)[0].float() - r.reference(x, res, w)[0].float())"
              ".abs().max().item())\"")

needs_bwrap = pytest.mark.skipif(os.system("bwrap --version >/dev/null 2>&1") != 0,
                                 reason="bubblewrap is not installed (scripts/install-system.sh installs it)")


def call(name: str, arguments: Any = None, raw: str | None = None, ident: str = "") -> ToolCall:
    text = raw if raw is not None else json.dumps(arguments if arguments is not None else {})
    return ToolCall(id=ident or f"call_{name}_{abs(hash(text)) % 10**6}", name=name, arguments=text)


def tools(*calls: ToolCall, content: str = "") -> ScriptedReply:
    return ScriptedReply(content, tool_calls=calls)


@pytest.fixture(scope="module")
def evaluator() -> EvaluatorActor:
    return EvaluatorActor("cpu", slots=1, options=JudgeOptions(warmup=1, timed=2))


def attempt(tmp_path: Path, evaluator: Any, script: Recorder, skill_path: Path | None = None, **budget: Any):
    spec = SimpleNamespace(name="scripted", litellm_id="openai/scripted", context_length=1_000_000,
                           supports_tools=True, num_gpus=0, max_output_tokens=None, prices=None)
    client = LLMClient(spec, script=script, retry_backoff_s=0.0)
    config = AttemptConfig(problem_id=EXAMPLE_PROBLEM, dsl="tirx", target="cpu", model="scripted",
                           agent="workspace", arm="skill" if skill_path else "solo", skill_path=skill_path,
                           budget=BudgetSpec(**budget), out_dir=tmp_path / "attempt")
    return asyncio.run(run_attempt(config, client, evaluator))


@needs_bwrap
@pytest.mark.judge
def test_tool_calls_drive_a_passing_attempt(tmp_path: Path, evaluator: EvaluatorActor) -> None:
    script = Recorder([
        tools(call("shell", {"command": "ls; ls docs; head -n 1 TASK.md"})),
        tools(call("shell", raw='{"command": "ls"')),  # truncated JSON
        tools(call("compile", {"file": "kernel.py"})),  # no such tool
        ScriptedReply("I will now think about the rows."),  # no tool call at all
        tools(call("write_file", {"path": "kernel.py", "content": GOOD}), call("shell", {"command": SELF_CHECK})),
        tools(call("submit")),
        tools(call("write_file", {"path": "/workspace/SKILL.md", "content": SKILL}), call("finish"),
              call("shell", {"command": "rm kernel.py"})),  # after finish: not run
    ])
    record = attempt(tmp_path, evaluator, script)

    assert record.status == "completed" and record.stop_reason == "finished", record.error
    listing = script.answers_before(1)[0]
    assert "exit code 0" in listing and "01_fused_add_rmsnorm.py" in listing and "CONTRACT.md" in listing
    assert "tirx.md" in listing and "# Task: mlp_norm/01_fused_add_rmsnorm" in listing
    assert "not a valid JSON object" in script.answers_before(2)[0]
    assert "no tool called 'compile'" in script.answers_before(3)[0]
    assert "made no tool call" in script.answers_before(4)[0]
    written, checked = script.answers_before(5)
    assert f"Wrote {len(GOOD.encode())} bytes to kernel.py" in written
    assert "exit code 0" in checked and "max_err" in checked  # torch + TVM compiled and ran inside the sandbox
    assert "Verdict: PASS" in script.answers_before(6)[0]

    out = tmp_path / "attempt"
    assert (out / "workspace" / "kernel.py").read_text() == GOOD  # the finish reply's later `rm` never ran
    # With 2 timed draws a preempted eager draw can make the tier pass2x (as for the final verdict below).
    assert [(s.counted, s.verdict.tier in ("pass", "pass2x")) for s in record.submissions] == [(True, True)]
    assert record.final_verdict is not None and record.final_verdict.tier in ("pass", "pass2x")
    assert (out / "final_kernel.py").read_text() == GOOD
    assert (out / "SKILL.md").read_text().strip() == SKILL
    assert len(record.llm_calls) == 7 and all(c.purpose == "turn" for c in record.llm_calls)  # no closing turn
    events = [json.loads(line) for line in (out / "transcript.jsonl").read_text().splitlines()]
    tool_events = [e for e in events if e["event"] == "tool"]
    assert [e["name"] for e in tool_events] == ["shell", "shell", "compile", "write_file", "shell", "submit",
                                                "write_file", "finish"]
    assert [e["malformed"] for e in tool_events][:3] == [False, True, True]


@needs_bwrap
@pytest.mark.judge
def test_linked_kernel_is_refused_and_grace_turns_end_the_attempt(tmp_path: Path,
                                                                  evaluator: EvaluatorActor) -> None:
    source_skill = tmp_path / "source_SKILL.md"
    source_skill.write_text("- Rows fit in one pass at these sizes (claim from an earlier attempt).\n")
    script = Recorder([
        # A link to a host file (here: a shipped solution) must not be read through by the host.
        tools(call("shell", {"command": f"rm kernel.py && ln -s {SOLUTION} kernel.py"}), call("submit")),
        tools(call("shell", {"command": "rm kernel.py"}),
              call("write_file", {"path": "kernel.py", "content": SYNTAX_ERROR}), call("submit")),
        ScriptedReply("Thinking."), ScriptedReply("Still thinking."), ScriptedReply("Done thinking."),
        ScriptedReply("```skill\n- A syntax error is rejected by the static checks (submission 1).\n```"),
    ])
    record = attempt(tmp_path, evaluator, script, skill_path=source_skill, submissions=1)

    refused = script.answers_before(1)[1]
    assert "Nothing was submitted and nothing counted" in refused and "symbolic link" in refused
    report = script.answers_before(2)[-1]
    assert "Verdict: FAIL" in report and "last judged submission" in report
    assert record.stop_reason == "submissions" and record.turns == 5
    assert [(s.counted, s.verdict.rejected_by) for s in record.submissions] == [(True, "static")]
    assert record.final_verdict is not None and record.final_verdict.tier == "fail"
    assert (tmp_path / "attempt" / "final_kernel.py").read_text() == SYNTAX_ERROR
    assert record.llm_calls[-1].purpose == "skill"  # SKILL.md was empty: one closing turn asked for it
    assert "static checks" in (tmp_path / "attempt" / "SKILL.md").read_text()
    # The skill arm: the source SKILL.md is in the task and beside it in the workspace.
    workspace = tmp_path / "attempt" / "workspace"
    assert "Rows fit in one pass" in (workspace / "SOURCE_SKILL.md").read_text()
    assert "SOURCE_SKILL.md holds" in (workspace / "TASK.md").read_text()
    assert record.config.arm == "skill" and record.skill_source_sha256


def test_parse_tool_call() -> None:
    assert parse_tool_call(call("shell", {"command": "ls"})) == ShellArgs("ls")
    assert parse_tool_call(call("submit", raw="")) == SubmitArgs()
    assert parse_tool_call(call("finish", raw="null")) == FinishArgs()
    assert parse_tool_call(call("write_file", {"path": "/workspace/./a/b.py", "content": "x"})) == \
        WriteFileArgs("a/b.py", "x")
    for bad in (call("write_file", {"path": "../x.py", "content": ""}),
                call("write_file", {"path": "/etc/passwd", "content": ""}),
                call("write_file", {"path": "k.py"}), call("shell", {"command": ""}), call("shell", raw="[1]"),
                call("shell", raw="{bad"), call("rm_rf", {}), call("shell", {"command": "x" * 200_000}),
                call("shell", raw='{"command": "echo \\u0000"}')):
        problem = parse_tool_call(bad)
        assert isinstance(problem, ToolCallProblem) and "nothing was run" in problem.message
    # A lone surrogate cannot be passed to exec: it is replaced, not allowed to crash the attempt.
    cleaned = parse_tool_call(call("shell", raw='{"command": "echo \\udcff"}'))
    assert isinstance(cleaned, ShellArgs) and cleaned.command.startswith("echo ")
    cleaned.command.encode("utf-8")  # encodable now


def test_long_write_arguments_are_compacted_in_history() -> None:
    big = call("write_file", {"path": "kernel.py", "content": "x" * 50_000})
    compact = json.loads(compact_arguments(big, 1000))
    assert compact["path"] == "kernel.py" and compact["content"].startswith("[50,000 characters")
    assert compact_arguments(call("shell", {"command": "ls"}), 1000) == '{"command": "ls"}'


@needs_bwrap
@pytest.mark.parametrize("dsl", ["tirx", "cutedsl"])
def test_doc_examples_work_inside_the_sandbox(tmp_path: Path, dsl: str) -> None:
    """The offline docs' end-to-end example, run where agents run it: TIRx executes on CPU; CuTe DSL compiles
    for sm_90a and then cannot launch (there is no GPU in the sandbox)."""
    blocks = re.findall(r"```python\n(.*?)```", (DOCS_DIR / f"{dsl}.md").read_text(), re.S)
    check = ("x = torch.randn(5, 7)\nassert torch.allclose(solve(x), x * 0.5)\nprint('EXAMPLE RAN')\n"
             if dsl == "tirx" else
             "try:\n    solve(torch.randn(5, 7, dtype=torch.bfloat16))\nexcept Exception as err:\n"
             "    print('COMPILED', len(_cache), type(err).__name__)\n")
    (tmp_path / "example.py").write_text(blocks[0] + "\n" + blocks[1] + "\n" + check)
    policy = default_policy()
    prepare_workspace(tmp_path, policy)
    result = asyncio.run(run_sandboxed("python example.py", tmp_path, policy))
    expected = "EXAMPLE RAN" if dsl == "tirx" else "COMPILED 1 DSLCudaRuntimeError"
    assert expected in result.stdout, result.stderr[-3000:]
