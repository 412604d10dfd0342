"""LLMClient through litellm's mock_response (the whole litellm path, no server): usage and cost accounting,
model ids, tool calls, bounded retries, timeouts, and the lazy import."""
from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import pytest

from mkb_ray.llm import LLMCallError, LLMClient, ScriptedReply, ToolCall
from mkb_ray.llm.client import COST_MAP_ENV_VAR, _warn_if_price_map_may_be_fetched

from conftest import REPO
from refused_port import refused_port

MESSAGES = [{"role": "user", "content": "write a kernel"}]


def api_spec(**prices: float) -> SimpleNamespace:
    return SimpleNamespace(name="frontier", litellm_id="openai/frontier-model", context_length=200_000,
                           prices=SimpleNamespace(usd_per_mtok_input=prices.get("input"),
                                                  usd_per_mtok_output=prices.get("output"), usd_per_gpu_hour=None))


def local_spec(num_gpus: int = 2, gpu_hour: float | None = 3.6) -> SimpleNamespace:
    # Flat price attributes (no `prices` object): the client reads either layout.
    return SimpleNamespace(name="open-model", litellm_id="hosted_vllm/open-model", num_gpus=num_gpus,
                           usd_per_gpu_hour=gpu_hour, usd_per_mtok_input=None, usd_per_mtok_output=None)


def run(coro):
    return asyncio.run(coro)


CLIENT_LOGGER = "mkb_ray.llm.client"


def client_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == CLIENT_LOGGER and r.levelno == logging.WARNING]


def warm_up_litellm() -> None:
    """What litellm does once per process — its import, and the lazy set-up of its first mock answer and first
    mock error — done before a test times a call: seconds on a loaded machine, and not what the test measures."""
    client = LLMClient(api_spec(), max_retries=0, script=[ScriptedReply("warm"), ScriptedReply(error="warm")])
    client.prepare()
    run(client.complete(MESSAGES))
    with pytest.raises(LLMCallError):
        run(client.complete(MESSAGES))


def test_api_model_reply_usage_and_per_token_cost():
    client = LLMClient(api_spec(input=2.0, output=10.0), script=[ScriptedReply("```python\nx = 1\n```")])
    assert client.model_id == "openai/frontier-model" and client.api_base is None
    reply = run(client.complete(MESSAGES, max_tokens=64))
    assert reply.content == "```python\nx = 1\n```" and reply.tool_calls == [] and reply.finish_reason == "stop"
    usage = reply.usage
    # litellm's mock reports 10 prompt and 20 completion tokens.
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (10, 20, 0)
    assert usage.cost_usd == pytest.approx((10 * 2.0 + 20 * 10.0) / 1e6)
    assert usage.gpu_s is None and usage.retries == 0 and usage.latency_s > 0
    assert client.context_tokens == 200_000


def test_local_server_model_id_and_gpu_seconds():
    client = LLMClient(local_spec(num_gpus=2, gpu_hour=3.6), "http://127.0.0.1:8000/v1/",
                       script=[ScriptedReply("hi")])
    assert client.model_id == "hosted_vllm/open-model" and client.api_base == "http://127.0.0.1:8000/v1"
    usage = run(client.complete(MESSAGES)).usage
    assert usage.gpu_s == pytest.approx(usage.latency_s * 2)
    assert usage.cost_usd == pytest.approx(usage.gpu_s / 3600 * 3.6)


def test_roster_model_spec_is_accepted():
    from mkb_ray.models.roster import get_model

    spec = get_model("smollm2")
    client = LLMClient(spec, "http://127.0.0.1:8000/v1", script=[ScriptedReply("ok")])
    assert client.model_id == "hosted_vllm/smollm2" and client.context_tokens == spec.context_length
    usage = run(client.complete(MESSAGES)).usage
    assert usage.cost_usd is None and usage.gpu_s is None  # CPU serving: no GPUs, no price


def test_tool_calls_come_back_raw_and_as_an_assistant_message():
    call = ToolCall(id="call_1", name="submit", arguments='{"note": "first try"}')
    client = LLMClient(api_spec(), script=[ScriptedReply("", tool_calls=[call])])
    reply = run(client.complete(MESSAGES, tools=[{"type": "function", "function": {
        "name": "submit", "parameters": {"type": "object", "properties": {}}}}], tool_choice="auto"))
    assert reply.tool_calls == [call]
    message = reply.as_message()
    assert message["role"] == "assistant"
    assert message["tool_calls"][0]["function"] == {"name": "submit", "arguments": '{"note": "first try"}'}


def test_transient_failure_is_retried_then_succeeds():
    client = LLMClient(api_spec(), max_retries=2, retry_backoff_s=0.0,
                       script=[ScriptedReply(error="server overloaded"), ScriptedReply("second time lucky")])
    reply = run(client.complete(MESSAGES))
    assert reply.content == "second time lucky" and reply.usage.retries == 1


def test_retries_are_bounded(caplog):
    client = LLMClient(api_spec(), max_retries=1, retry_backoff_s=0.0,
                       script=[ScriptedReply(error="down")] * 5)
    with caplog.at_level(logging.WARNING, logger=CLIENT_LOGGER), pytest.raises(LLMCallError) as caught:
        run(client.complete(MESSAGES))
    assert caught.value.kind == "connection" and caught.value.attempts == 2 and "down" in str(caught.value)
    assert client._script_position[0] == 2  # no third try
    assert client_warnings(caplog) == ["LLM call to openai/frontier-model failed (connection), retry 1/1 in 0.0 s"]


def test_backoff_doubles_per_retry(caplog):
    client = LLMClient(api_spec(), max_retries=2, retry_backoff_s=0.05,
                       script=[ScriptedReply(error="down"), ScriptedReply(error="down"), ScriptedReply("up")])
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger=CLIENT_LOGGER):
        reply = run(client.complete(MESSAGES))
    assert reply.content == "up" and reply.usage.retries == 2 and time.monotonic() - started >= 0.15
    delays = [r.args[-1] for r in caplog.records if r.name == CLIENT_LOGGER]
    assert delays == [pytest.approx(0.05), pytest.approx(0.1)]


def test_no_retry_whose_backoff_would_pass_the_deadline():
    client = LLMClient(api_spec(), max_retries=3, retry_backoff_s=10.0, script=[ScriptedReply(error="down")] * 4)
    warm_up_litellm()
    started = time.monotonic()
    with pytest.raises(LLMCallError) as caught:
        run(client.complete(MESSAGES, timeout_s=5.0))
    assert caught.value.kind == "connection" and caught.value.attempts == 1 and time.monotonic() - started < 5
    assert client._script_position[0] == 1


def test_non_retryable_errors_are_not_retried():
    # litellm's mock raises its own ContextWindowExceededError for this reply text.
    client = LLMClient(api_spec(), max_retries=3, retry_backoff_s=0.0,
                       script=[ScriptedReply("litellm.ContextWindowExceededError"), ScriptedReply("never reached")])
    with pytest.raises(LLMCallError) as caught:
        run(client.complete(MESSAGES))
    assert caught.value.kind == "context_window" and caught.value.attempts == 1
    assert client._script_position[0] == 1


def test_per_try_timeout_and_overall_deadline():
    slow = ScriptedReply("too late", delay_s=30)
    client = LLMClient(api_spec(), timeout_s=0.3, max_retries=1, retry_backoff_s=0.0, script=[slow, slow])
    client.prepare()  # litellm's first import (seconds on a loaded machine) is not what the bounds below measure
    started = time.monotonic()
    with pytest.raises(LLMCallError) as caught:
        run(client.complete(MESSAGES))
    assert caught.value.kind == "timeout" and caught.value.attempts == 2
    assert time.monotonic() - started < 5
    # The call-level timeout (the attempt's remaining wall time) bounds retries too: no second try after it.
    client = LLMClient(api_spec(), timeout_s=60, max_retries=5, retry_backoff_s=0.0, script=[slow] * 6)
    started = time.monotonic()
    with pytest.raises(LLMCallError) as caught:
        run(client.complete(MESSAGES, timeout_s=0.5))
    assert caught.value.kind == "timeout" and time.monotonic() - started < 5


def test_exhausted_script_is_an_error_not_a_hang():
    client = LLMClient(api_spec(), script=[ScriptedReply("only one")])
    run(client.complete(MESSAGES))
    with pytest.raises(LLMCallError) as caught:
        run(client.complete(MESSAGES))
    assert caught.value.kind == "script_exhausted"


def test_unreachable_server_fails_fast_with_a_connection_error():
    # A loopback port bound by this test and never listened on: the connection is refused at once.
    with refused_port() as port, pytest.raises(LLMCallError) as caught:
        client = LLMClient(local_spec(), f"http://127.0.0.1:{port}/v1", timeout_s=20, max_retries=0)
        run(client.complete(MESSAGES))
    assert caught.value.kind == "connection" and caught.value.latency_s < 20


# Run in a fresh interpreter (litellm reads the variable at its first import). Every host-name lookup is recorded
# and refused, so an attempt to download the price map fails the test whether or not the network is reachable.
OFFLINE_IMPORT = textwrap.dedent("""
    import os, socket, sys
    lookups = []
    def refuse(host, *args, **kwargs):
        lookups.append(host)
        raise OSError(f"no network in this test ({host})")
    socket.getaddrinfo = refuse
    import mkb_ray.llm, mkb_ray.agents.run_attempt, mkb_ray.cli.attempt
    assert "litellm" not in sys.modules, "litellm imported eagerly"
    from mkb_ray.llm.client import _litellm
    environ = dict(os.environ)
    _litellm()
    assert "litellm" in sys.modules
    assert dict(os.environ) == environ, "_litellm() changed os.environ"
    assert lookups == [], f"looked up {lookups}"
""")


def test_litellm_is_imported_lazily_and_offline():
    env = {**os.environ, COST_MAP_ENV_VAR: "True"}  # as the caller (the mkb command line) sets it
    result = subprocess.run([sys.executable, "-c", OFFLINE_IMPORT], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "fetch" not in result.stderr.lower(), result.stderr[-2000:]  # neither litellm's nor our warning


def test_a_missing_cost_map_variable_is_warned_about_once_before_the_import(monkeypatch, caplog):
    # No real import here (that would try the network): the check that runs just before it.
    monkeypatch.delenv(COST_MAP_ENV_VAR, raising=False)
    monkeypatch.delitem(sys.modules, "litellm", raising=False)
    with caplog.at_level(logging.WARNING, logger=CLIENT_LOGGER):
        _warn_if_price_map_may_be_fetched()
        [warning] = client_warnings(caplog)
        assert COST_MAP_ENV_VAR in warning and "fetch its price map" in warning and "before" in warning
        caplog.clear()
        monkeypatch.setitem(sys.modules, "litellm", SimpleNamespace())  # imported already: too late to matter
        _warn_if_price_map_may_be_fetched()
        monkeypatch.delitem(sys.modules, "litellm")
        monkeypatch.setenv(COST_MAP_ENV_VAR, "true")  # litellm compares case-insensitively
        _warn_if_price_map_may_be_fetched()
        assert client_warnings(caplog) == []
