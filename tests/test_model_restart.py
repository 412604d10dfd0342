"""A model server whose engine dies is detected and restarted, for real: SmolLM2 on vLLM (CPU) under Ray Serve LLM,
its EngineCore process killed with SIGKILL (the way vLLM 0.32's CPU engine dies on a seeded request), then
`ModelServices` — what the campaign scheduler uses — reports it unhealthy and brings up a server that answers."""
from __future__ import annotations

import asyncio
import os
import signal
import time

import psutil
import pytest


def _engine_pids(ray, handle) -> list[int]:
    pids = ray.get(handle.pids.remote())
    engines = []
    for pid in pids:
        try:
            if "EngineCore" in psutil.Process(pid).name() or "EngineCore" in " ".join(psutil.Process(pid).cmdline()):
                engines.append(pid)
        except psutil.NoSuchProcess:
            continue
    return engines


@pytest.mark.model
@pytest.mark.shared_server("restarts")
def test_a_dead_engine_is_detected_and_the_server_restarted(serving_ray, smollm2_server):
    """On the shared server, started by `ModelServices` as `mkb run` starts it (tests/shared_serving.py), after the
    tests that only talk to it: its engine is killed here, and the restarted server is what the test that checks a
    clean stop (tests/test_model_server.py) then stops."""
    from mkb_ray.llm.client import LLMClient
    from mkb_ray.models.roster import get_model

    ray, services = serving_ray, smollm2_server.services
    spec = get_model("smollm2")
    assert services.healthy("smollm2")
    served = services.models["smollm2"]
    engines = _engine_pids(ray, served.handle)
    assert engines, "no vLLM EngineCore process found under the server"
    for pid in engines:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 120
    while services.healthy("smollm2") and time.monotonic() < deadline:
        time.sleep(2)
    assert not services.healthy("smollm2"), "a server without its engine still reported healthy"

    api_base = services.restart("smollm2")
    assert services.models["smollm2"].restarts == 1 and smollm2_server.api_base == api_base
    assert services.healthy("smollm2")
    reply = asyncio.run(LLMClient(spec, api_base).complete(
        [{"role": "user", "content": "Say hello."}], max_tokens=8))
    assert reply.content.strip() and reply.usage.completion_tokens > 0
