"""The typed records of one attempt: its config, its budget, every LLM call, every submission and the result.

Everything here is a pydantic model with `schema_version` and `extra="forbid"`, so a record written by one version
is either read back exactly or refused with the field that does not fit. Paths inside records are relative to the
attempt's output directory, so a run directory can be moved or archived whole.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .verdict import Verdict

SCHEMA_VERSION = 1

AttemptStatus = Literal["completed", "skipped", "error"]
# Why the agent loop stopped. `finished`: the agent said it was done; `submissions`: the submission budget was
# spent; `wall_clock`, `tokens`, `max_turns`: those budgets ran out; `llm_error`: the model endpoint kept failing;
# `context_overflow`: the conversation no longer fits the model's context; `empty_source_skill`: a skill attempt
# whose source SKILL.md is empty (the attempt is skipped); `identical_hand_off`: an intervention trial whose hand-off
# is byte-identical to its control's (an ablation that removed nothing: skipped, its effect is 0 by construction);
# `error`: an infrastructure failure (see `error`).
StopReason = Literal["finished", "submissions", "wall_clock", "tokens", "max_turns", "llm_error",
                     "context_overflow", "empty_source_skill", "identical_hand_off", "error"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int = SCHEMA_VERSION


class BudgetSpec(_Record):
    """What one attempt may spend. Defaults follow MetaKernelBench (40 min, 10 submissions, 300 KB kernels)."""

    wall_clock_s: float = Field(2400.0, gt=0, description="attempt clock limit; see count_queue_wait")
    submissions: int = Field(10, ge=0, description="counted (judged) submissions; the next one is refused")
    kernel_bytes: int = Field(300_000, gt=0, description="largest kernel source accepted for judging, UTF-8 bytes")
    tokens: Optional[int] = Field(None, gt=0,
                                  description="prompt + completion tokens over all LLM calls; None: no limit")
    count_queue_wait: bool = Field(
        False, description="False: the attempt clock pauses while a submission waits in the evaluator queue "
                           "(queue time is still recorded); True: MetaKernelBench's plain wall clock")
    # A safety net for agents that neither submit nor finish (a small model chatting forever); the wall clock is
    # the budget that binds in normal runs.
    max_turns: Optional[int] = Field(50, gt=0, description="LLM turns of the agent loop; None: no limit")
    reply_max_tokens: int = Field(4096, gt=0, description="completion tokens asked for per LLM call (capped by "
                                                          "what the model's context leaves)")


class AttemptConfig(_Record):
    """One attempt, fully resolved: stored inside its record so the attempt can be reproduced."""

    problem_id: str = Field(description="<family>/<NN_name>")
    dsl: Literal["cutedsl", "tirx"]
    target: Literal["gpu", "cpu"] = Field("gpu", description="cpu: the TIRx CPU (llvm) variant, judged on CPU")
    model: str = Field(description="roster name of the model")
    agent: Literal["workspace", "chat"] = "chat"
    arm: Literal["solo", "skill"] = "solo"
    skill_path: Optional[Path] = Field(None, description="the source SKILL.md of a skill attempt")
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    seed: Optional[int] = Field(None, description="sampling seed passed to the model, where it supports one")
    out_dir: Path
    attempt_id: Optional[str] = Field(None, description="the trial id; also the model server's session-affinity key")

    @model_validator(mode="after")
    def _consistent(self) -> "AttemptConfig":
        if self.target == "cpu" and self.dsl != "tirx":
            raise ValueError("target 'cpu' exists only for dsl 'tirx' (CuTe DSL kernels cannot execute on a CPU)")
        if (self.arm == "skill") != (self.skill_path is not None):
            raise ValueError("arm 'skill' needs skill_path, and only a skill attempt takes one")
        return self


class LLMUsage(_Record):
    """What one LLM call cost."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = Field(0, description="prompt tokens served from the provider's/vLLM's prefix cache")
    latency_s: float = Field(0.0, description="wall time of the call, retries included")
    retries: int = 0
    cost_usd: Optional[float] = Field(None, description="per-token price from the roster; None when unpriced")
    gpu_s: Optional[float] = Field(
        None, description="local servers: latency_s x the server's GPUs — an upper bound that ignores batching "
                          "with concurrent calls; campaign-level GPU-hours come from server uptime")

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class LLMCallRecord(_Record):
    """One call of the agent to the model (successful or not)."""

    index: int = Field(description="0-based, in call order within the attempt")
    turn: int = Field(description="the agent turn this call served")
    purpose: str = Field("turn", description="turn | skill (the final SKILL.md request) | ...")
    started_at: str = Field(description="ISO-8601 UTC")
    attempt_clock_s: float = Field(description="attempt-clock time when the call started")
    ok: bool
    error: Optional[str] = None
    finish_reason: Optional[str] = None
    reply_chars: int = 0
    tool_calls: int = 0
    max_tokens: int = 0
    constrained: Optional[str] = Field(None, description="the JSON schema the reply was decoded to (its name; "
                                                         "None: free text)")
    usage: LLMUsage = Field(default_factory=LLMUsage)


class SubmissionRecord(_Record):
    """One kernel the agent submitted. Refused submissions (never judged) are recorded too, with the reason."""

    index: int = Field(description="1-based over all submissions of the attempt, refused ones included")
    counted: bool = Field(description="True when it was judged and counts against the submission budget")
    refused_reason: Optional[str] = None
    kernel_sha256: Optional[str] = None
    kernel_bytes: int = 0
    artifact_path: Optional[str] = Field(None, description="the kernel source, relative to the attempt directory")
    verdict_path: Optional[str] = None
    verdict: Optional[Verdict] = None
    submitted_at: str = Field(description="ISO-8601 UTC")
    attempt_clock_s: float = Field(description="attempt-clock time when submitted")
    round_trip_s: float = Field(0.0, description="from submit to verdict, as the agent waited for it")
    eval_s: float = Field(0.0, description="the judge's own wall time (verdict.wall_s)")
    queue_wait_s: float = Field(0.0, description="round_trip_s - eval_s: time spent waiting for an evaluator slot")


class AttemptRecord(_Record):
    """The result of one attempt: written to `record.json` in its output directory."""

    config: AttemptConfig
    status: AttemptStatus
    stop_reason: StopReason
    error: Optional[str] = Field(None, description="what went wrong when status is error")
    synthetic: bool = Field(False, description="True when models/GPUs were replaced by calibrated random draws")
    problem_hash: Optional[str] = Field(None, description="sha256 of the problem file and its sidecar")
    template_hash: str = Field(description="sha256 of the agent instruction templates (mkb_ray/agents/templates)")
    task_sha256: Optional[str] = Field(None, description="sha256 of the task statement the agent was given")
    model: str
    litellm_model: Optional[str] = None
    endpoint: Optional[str] = Field(None, description="api_base of a served model; None for provider APIs")
    skill_source_sha256: Optional[str] = Field(None, description="sha256 of the source SKILL.md (skill arm)")
    turns: int = 0
    submissions: list[SubmissionRecord] = Field(default_factory=list)
    llm_calls: list[LLMCallRecord] = Field(default_factory=list)
    final_verdict: Optional[Verdict] = Field(None, description="the final kernel judged once more: the result")
    final_kernel_path: Optional[str] = None
    final_verdict_path: Optional[str] = None
    skill_md_path: Optional[str] = Field(None, description="the SKILL.md this attempt wrote (may be empty)")
    skill_md_bytes: int = 0
    transcript_path: Optional[str] = None
    wall_s: float = Field(0.0, description="wall time of the agent loop (final judging excluded)")
    attempt_clock_s: float = Field(0.0, description="what the wall-clock budget was charged")
    queue_wait_s: float = 0.0
    final_eval_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: Optional[float] = None
    gpu_s: Optional[float] = None
    started_at: str
    finished_at: str
    package_versions: dict[str, str] = Field(default_factory=dict)
    git_commit: Optional[str] = None
    notes: list[str] = Field(default_factory=list, description="what the runner adapted (e.g. docs clipped to fit)")

    @property
    def counted_submissions(self) -> int:
        return sum(1 for s in self.submissions if s.counted)
