"""One LLM client for every model: our vLLM servers (`hosted_vllm/<name>` + api_base) and provider APIs.

litellm is imported lazily (it costs ~8 s of CPU). It reads `LITELLM_LOCAL_MODEL_COST_MAP` once, at import, and
without it tries to fetch a price map from the network: whoever starts the process sets it (the `mkb` command line
does); this library sets no environment variables and only warns. Every call has an explicit timeout and a bounded
number of retries on transient failures; every call's tokens, latency and cost come back as an `LLMUsage`.

Tests (and dry runs) drive the real client with a *script*: each call takes the next `ScriptedReply` and hands it
to litellm's `mock_response` / `mock_tool_calls`, so the whole litellm path runs without a server.
"""
from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Sequence, Union

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, stop_any, wait_exponential

from ..records import LLMUsage

log = logging.getLogger(__name__)

# Context length assumed when the roster entry does not say (SmolLM2's is 8192).
DEFAULT_CONTEXT_TOKENS = 8192


class ModelSpecLike(Protocol):
    """What the client reads from a roster entry (`mkb_ray.models.roster.ModelSpec`); prices may sit on the spec
    itself or on a nested `prices` object."""

    name: str
    litellm_id: str


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the model made it; `arguments` is the raw JSON text (parsing it is the agent's job: bad
    JSON from a model is a malformed turn, not a client error)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class LLMReply:
    content: str
    tool_calls: list[ToolCall]
    usage: LLMUsage
    finish_reason: Optional[str] = None
    model: str = ""

    def as_message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation (OpenAI format)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls]
        return message


@dataclass(frozen=True)
class ScriptedReply:
    """One scripted model turn. `error` makes litellm raise a mock failure (mapped like a server error, so it is
    retried); `delay_s` simulates a slow model (wall-clock budget tests)."""

    content: str = ""
    tool_calls: Sequence[ToolCall] = ()
    error: Optional[str] = None
    delay_s: float = 0.0


# A script: a list consumed in order, or a function of (messages, call index) for replies that react to feedback.
Script = Union[Sequence[ScriptedReply], Callable[[list[dict[str, Any]], int], ScriptedReply]]


class LLMCallError(Exception):
    """The call failed for good (after retries, or at once for non-transient errors)."""

    def __init__(self, message: str, kind: str, attempts: int, latency_s: float) -> None:
        super().__init__(message)
        self.kind = kind  # timeout | connection | context_window | bad_request | auth | script_exhausted | other
        self.attempts = attempts
        self.latency_s = latency_s


# litellm reads it once, at its first import; unless it is "True" litellm tries to download its price map.
COST_MAP_ENV_VAR = "LITELLM_LOCAL_MODEL_COST_MAP"


def _warn_if_price_map_may_be_fetched() -> None:
    """One warning, before litellm's first import, when nothing stops it from going to the network."""
    if "litellm" in sys.modules or os.environ.get(COST_MAP_ENV_VAR, "").lower() == "true":
        return
    log.warning("%s is not set to True: litellm may try to fetch its price map from the network when imported. "
                "Set %s=True in the environment before the process imports litellm (the mkb command line does).",
                COST_MAP_ENV_VAR, COST_MAP_ENV_VAR)


def _litellm() -> Any:
    _warn_if_price_map_may_be_fetched()
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def _price(spec: Any, name: str) -> Optional[float]:
    prices = getattr(spec, "prices", None)
    value = getattr(prices, name, None) if prices is not None else None
    if value is None:
        value = getattr(spec, name, None)
    return float(value) if value is not None else None


def _classify(error: BaseException, litellm: Any) -> tuple[str, bool]:
    """(kind, retryable) for an exception raised by litellm."""
    if isinstance(error, (asyncio.TimeoutError, litellm.Timeout)):
        return "timeout", True
    if isinstance(error, litellm.ContextWindowExceededError):
        return "context_window", False
    if isinstance(error, (litellm.AuthenticationError, litellm.PermissionDeniedError)):
        return "auth", False
    if isinstance(error, litellm.BadRequestError):
        return "bad_request", False
    if isinstance(error, (litellm.RateLimitError, litellm.ServiceUnavailableError, litellm.InternalServerError,
                          litellm.APIConnectionError)):
        return "connection", True
    return "other", False


class LLMClient:
    """Talks to one roster model.

    `api_base` set: the model is served by one of our vLLM servers under its roster name (`hosted_vllm/<name>`),
    and calls carry an `x-session-id` header (the attempt id) so a prefix-aware router keeps an attempt's turns on
    one replica. `api_base` None: the provider's litellm id from the roster (keys come from the environment).
    """

    def __init__(self, spec: Any, api_base: Optional[str] = None, *, timeout_s: float = 600.0,
                 max_retries: int = 2, retry_backoff_s: float = 2.0, session_id: Optional[str] = None,
                 script: Optional[Script] = None) -> None:
        if max_retries < 0 or timeout_s <= 0:
            raise ValueError("max_retries must be >= 0 and timeout_s > 0")
        self.spec = spec
        self.api_base = api_base.rstrip("/") if api_base else None
        self.model_id = f"hosted_vllm/{spec.name}" if self.api_base else str(spec.litellm_id)
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.retry_backoff_s = retry_backoff_s
        self.session_id = session_id
        self.script = script
        self._script_position = [0]  # shared with clones (with_session), so a script is consumed once
        self.context_tokens = int(getattr(spec, "context_length", None) or DEFAULT_CONTEXT_TOKENS)
        self.supports_tools = bool(getattr(spec, "supports_tools", False))
        self.max_output_tokens: Optional[int] = getattr(spec, "max_output_tokens", None)
        self.request_seed = bool(getattr(spec, "request_seed", True))
        self.default_temperature: Optional[float] = getattr(spec, "temperature", None)
        # Only our own vLLM servers continue a partial assistant message (and take vLLM sampling extras); provider
        # APIs differ, so neither applies there.
        self.open_fences = bool(getattr(spec, "open_fences", False)) and bool(api_base)
        self.skill_format: str = str(getattr(spec, "skill_format", "free")) if api_base else "free"
        self.repetition_penalty: Optional[float] = getattr(spec, "repetition_penalty", None) if api_base else None
        self._gpus = float(getattr(spec, "num_gpus", 0) or 0) if self.api_base else 0.0

    @property
    def name(self) -> str:
        return str(self.spec.name)

    def prepare(self) -> None:
        """Import litellm now (seconds of CPU), so that the first call of an attempt is not charged for it."""
        _litellm()

    def with_session(self, session_id: Optional[str]) -> "LLMClient":
        """The same client with another session-affinity key (one per attempt). Scripts are shared."""
        clone = LLMClient(self.spec, self.api_base, timeout_s=self.timeout_s, max_retries=self.max_retries,
                          retry_backoff_s=self.retry_backoff_s, session_id=session_id, script=self.script)
        clone._script_position = self._script_position
        return clone

    def _next_scripted(self, messages: list[dict[str, Any]]) -> ScriptedReply:
        index = self._script_position[0]
        self._script_position[0] += 1
        if callable(self.script):
            return self.script(messages, index)
        assert self.script is not None
        if index >= len(self.script):
            raise LLMCallError(f"the script has only {len(self.script)} replies (call {index + 1})",
                               "script_exhausted", 1, 0.0)
        return self.script[index]

    def _usage(self, response: Any, latency_s: float, retries: int) -> LLMUsage:
        raw = getattr(response, "usage", None)
        prompt = int(getattr(raw, "prompt_tokens", 0) or 0)
        completion = int(getattr(raw, "completion_tokens", 0) or 0)
        details = getattr(raw, "prompt_tokens_details", None)
        cached = int(getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
        cost_usd: Optional[float] = None
        price_in, price_out = _price(self.spec, "usd_per_mtok_input"), _price(self.spec, "usd_per_mtok_output")
        gpu_s = latency_s * self._gpus if self._gpus else None
        if not self.api_base and (price_in is not None or price_out is not None):
            cost_usd = (prompt * (price_in or 0.0) + completion * (price_out or 0.0)) / 1e6
        elif gpu_s is not None and (gpu_hour := _price(self.spec, "usd_per_gpu_hour")) is not None:
            cost_usd = gpu_s / 3600.0 * gpu_hour
        return LLMUsage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached,
                        latency_s=latency_s, retries=retries, cost_usd=cost_usd, gpu_s=gpu_s)

    def _retrying(self, litellm: Any, deadline: Optional[float]) -> AsyncRetrying:
        """Retries of the retryable kinds of `_classify`, at most `max_retries`, backing off `retry_backoff_s`,
        twice that, ...; none whose backoff would end past `deadline`. The last failure is re-raised as it is."""
        # Not litellm's `num_retries`: it cannot be bounded by the call's deadline (fixed tries and per-try timeout).
        wait = wait_exponential(multiplier=self.retry_backoff_s, exp_base=2)

        def out_of_time(state: RetryCallState) -> bool:
            return deadline is not None and time.monotonic() + wait(state) >= deadline

        def log_retry(state: RetryCallState) -> None:
            assert state.outcome is not None  # tenacity calls this after a failed try
            kind, _ = _classify(state.outcome.exception(), litellm)
            log.warning("LLM call to %s failed (%s), retry %d/%d in %.1f s", self.model_id, kind,
                        state.attempt_number, self.max_retries, wait(state))

        return AsyncRetrying(stop=stop_any(stop_after_attempt(self.max_retries + 1), out_of_time), wait=wait,
                             retry=retry_if_exception(lambda error: _classify(error, litellm)[1]),
                             before_sleep=log_retry, reraise=True)

    async def _try_once(self, litellm: Any, kwargs: dict[str, Any], messages: list[dict[str, Any]],
                        deadline: Optional[float]) -> Any:
        """One try, at most the client's `timeout_s` and never past `deadline`; a scripted reply goes to litellm
        as its `mock_response` / `mock_tool_calls`."""
        per_try_s = self.timeout_s if deadline is None else min(self.timeout_s, deadline - time.monotonic())
        if per_try_s <= 0:
            raise asyncio.TimeoutError("no time left for the call")
        call = {**kwargs, "timeout": per_try_s}
        if self.script is not None:
            scripted = self._next_scripted(messages)
            if scripted.delay_s:
                await asyncio.wait_for(asyncio.sleep(scripted.delay_s), per_try_s)
            call["mock_response"] = Exception(scripted.error) if scripted.error else scripted.content
            call["mock_tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in scripted.tool_calls] or None
        # Belt and braces: litellm's own timeout does not cover every phase (connection set-up, retries).
        return await asyncio.wait_for(litellm.acompletion(**call), per_try_s + 5.0)

    async def complete(self, messages: list[dict[str, Any]], tools: Optional[list[dict[str, Any]]] = None,
                       tool_choice: Optional[Union[str, dict[str, Any]]] = None, max_tokens: int = 1024,
                       timeout_s: Optional[float] = None, temperature: Optional[float] = None,
                       seed: Optional[int] = None, prefill: Optional[str] = None,
                       response_format: Optional[dict[str, Any]] = None) -> LLMReply:
        """One chat completion. Each try lasts at most the client's `timeout_s`; the optional `timeout_s` here
        bounds the whole call, retries included (the attempt's remaining wall time). Transient failures (timeouts,
        connection errors, 5xx, rate limits) are retried up to `max_retries` times with exponential backoff.
        `prefill`: the reply's opening text — the server continues it, and the returned content starts with it.
        `response_format`: OpenAI's (`{"type": "json_schema", "json_schema": {...}}`): vLLM decodes to the schema,
        provider APIs that support structured outputs keep to it.
        Raises `LLMCallError` when the call fails for good."""
        litellm = _litellm()
        started = time.monotonic()
        deadline = started + timeout_s if timeout_s is not None else None
        kwargs: dict[str, Any] = {"model": self.model_id, "messages": messages, "max_tokens": max_tokens,
                                  "num_retries": 0, "drop_params": True}
        if self.api_base:
            kwargs["api_base"] = self.api_base
            kwargs["api_key"] = "EMPTY"  # our servers take no key; litellm wants one for the OpenAI route
            if self.session_id:
                kwargs["extra_headers"] = {"x-session-id": self.session_id}
        extra_body: dict[str, Any] = {}
        if prefill:
            kwargs["messages"] = [*messages, {"role": "assistant", "content": prefill}]
            # vLLM's chat endpoint: render the template up to the open assistant turn and continue it.
            extra_body.update(continue_final_message=True, add_generation_prompt=False)
        if self.repetition_penalty is not None:
            extra_body["repetition_penalty"] = self.repetition_penalty
        if extra_body:
            kwargs["extra_body"] = extra_body
        if response_format is not None:
            kwargs["response_format"] = response_format
        if tools:
            kwargs["tools"] = tools
            if tool_choice is not None:
                kwargs["tool_choice"] = tool_choice
        if temperature is None:
            temperature = self.default_temperature
        if temperature is not None:
            kwargs["temperature"] = temperature
        if seed is not None and self.request_seed:
            kwargs["seed"] = seed
        attempts = 0
        try:
            async for attempt in self._retrying(litellm, deadline):
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    response = await self._try_once(litellm, kwargs, messages, deadline)
        except LLMCallError:
            raise
        except Exception as error:  # noqa: BLE001 - classified, re-raised as LLMCallError
            kind, _ = _classify(error, litellm)
            detail = str(error) or type(error).__name__
            raise LLMCallError(f"{kind}: {detail[:2000]}", kind, attempts, time.monotonic() - started) from error
        latency_s = time.monotonic() - started
        choice = response.choices[0]
        message = choice.message
        calls = [ToolCall(id=str(c.id or f"call_{i}"), name=str(c.function.name or ""),
                          arguments=str(c.function.arguments or ""))
                 for i, c in enumerate(getattr(message, "tool_calls", None) or [])]
        content = message.content or ""
        if prefill and not content.startswith(prefill):
            content = prefill + content
        return LLMReply(content=content, tool_calls=calls,
                        usage=self._usage(response, latency_s, attempts - 1),
                        finish_reason=getattr(choice, "finish_reason", None), model=self.model_id)
