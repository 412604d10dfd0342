"""One local Ray and one SmolLM2 server, shared by the real-model tests of several modules (tests/conftest.py).

A SmolLM2 start (vLLM's CPU backend under Ray Serve LLM) costs ~50 s on CI and a local Ray a few more, so the tests
that only talk to the server share one start, and the test that restarts a server of its own shares the Ray. Both
live only while those tests run back to back: before any other test that needs Ray, the server is stopped (and
checked to have left nothing) and Ray shut down, because such tests start, join or shut down Ray themselves (the
`local_ray` fixture shuts down whatever Ray it finds at its module's end; an in-process `mkb run` does too), and the
restart test serves the same model under the same actor and Serve application names.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Optional

from mkb_ray.models import processes

# Logical CPUs, as test_end_to_end and test_model_restart had: the engine's placement bundle takes one, an
# attempt's EvaluatorActor another.
SERVING_CPUS = 4
START_TIMEOUT_S = 900.0
STOP_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class ServerStop:
    """What stopping a server left behind: nothing, when it stopped clean."""

    report: dict[str, Any]  # ModelServer.stop()'s report
    pids: list[int]         # the processes the server owned just before the stop
    left: list[int]         # those still alive after it
    port: int               # the HTTP port it served on
    port_open: bool         # whether that port still accepts connections

    @property
    def clean(self) -> bool:
        return (bool(self.report.get("stopped")) and self.report.get("still_running") == []
                and self.report.get("force_killed") == [] and not self.left and not self.port_open)


@dataclass
class SharedServer:
    """A started SmolLM2 ModelServer actor on the shared Ray."""

    handle: Any                # the ModelServer actor
    info: dict[str, Any]       # what its start() returned
    startup_s: float           # wall time of that start, seen from here
    ray_cpus_taken: float      # Ray CPU slots in use once it served (total minus available; nothing else held any)
    stopped: Optional[ServerStop] = None

    @property
    def api_base(self) -> str:
        return self.info["api_base"]

    def stop(self) -> ServerStop:
        """Stop the server and its actor (idempotent); the shared fixture starts a fresh one for the next user."""
        if self.stopped is not None:
            return self.stopped
        import ray

        from mkb_ray.campaign.services import _wait_name_free

        pids = ray.get(self.handle.pids.remote(), timeout=60)
        report = ray.get(self.handle.stop.remote(), timeout=STOP_TIMEOUT_S)
        ray.kill(self.handle)
        # A killed named actor frees its name later: the next server (shared or a test's own) must not find it.
        _wait_name_free(f"mkb-model-server:{self.info['model']}")
        self.stopped = ServerStop(report, pids, processes.alive(pids), self.info["port"],
                                  processes.port_open(self.info["port"]))
        return self.stopped


class SharedServing:
    """The shared Ray and SmolLM2 server: each started on first use, then kept until released."""

    def __init__(self) -> None:
        self.owns_ray = False  # whether Ray was started here (and so is shut down here)
        self._server: Optional[SharedServer] = None

    def ray(self) -> Any:
        import ray

        from mkb_ray.models.local_ray import init_local_ray

        if not ray.is_initialized():
            self.owns_ray = init_local_ray(num_cpus=SERVING_CPUS)
        return ray

    def server(self) -> SharedServer:
        if self._server is None or self._server.stopped is not None:
            from mkb_ray.actors.model_server import make_model_server
            from mkb_ray.models.roster import get_model

            ray = self.ray()
            handle = make_model_server(get_model("smollm2"))
            began = time.monotonic()
            info = ray.get(handle.start.remote(), timeout=START_TIMEOUT_S)
            startup_s = time.monotonic() - began
            taken = ray.cluster_resources().get("CPU", 0) - ray.available_resources().get("CPU", 0)
            self._server = SharedServer(handle, info, startup_s, taken)
        return self._server

    def stop_server(self) -> Optional[ServerStop]:
        """Stop the server if it still runs; None when there was none (or its user stopped and checked it)."""
        served, self._server = self._server, None
        if served is None or served.stopped is not None:
            return None
        return served.stop()

    def release(self) -> Optional[ServerStop]:
        """Stop the server, then shut down Ray if it was started here."""
        try:
            return self.stop_server()
        finally:
            if self.owns_ray:
                import ray

                ray.shutdown()
                self.owns_ray = False


def check_clean(stop: Optional[ServerStop]) -> None:
    """Fail (the test whose teardown released the server, hence the run) when a stop left anything behind."""
    if stop is not None and not stop.clean:
        raise AssertionError(f"the shared SmolLM2 server did not stop clean: {stop}")
