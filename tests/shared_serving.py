"""One local Ray and one SmolLM2 server, shared by the real-model tests of several modules (tests/conftest.py).

A SmolLM2 start (vLLM's CPU backend under Ray Serve LLM) costs ~50 s on CI (two to three times that beside a busy
CPU), so the real-model tests share one, started the way `mkb run` starts its models (`ModelServices`). They run back
to back in an order that needs no second start but the one under test: the tests that only talk to the server
first, then the test that kills its engine and restarts it through those services, then the test that stops the
restarted server and checks that it left nothing (tests/conftest.py, `SHARED_SERVER_PHASES`). Server and Ray live
only while those tests run: before any other test that needs Ray, the server is stopped (and checked to have left
nothing) and Ray shut down, because such tests start, join or shut down Ray themselves (the `local_ray` fixture
shuts down whatever Ray it finds at its module's end; an in-process `mkb run` does too).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Optional

from mkb_ray.models import processes

# Logical CPUs, as test_end_to_end and test_model_restart had: the engine's placement bundle takes one, an
# attempt's EvaluatorActor another.
SERVING_CPUS = 4
MODEL = "smollm2"
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
    """The started SmolLM2 server on the shared Ray, as the campaign's `ModelServices` holds it: a test that
    restarts it through those services (tests/test_model_restart.py) leaves the restarted one to its successors."""

    services: Any              # mkb_ray.campaign.services.ModelServices, serving MODEL
    startup_s: float           # wall time of the first start, seen from here
    ray_cpus_taken: float      # Ray CPU slots in use once it served (total minus available; nothing else held any)
    stopped: Optional[ServerStop] = None

    @property
    def handle(self) -> Any:
        """The ModelServer actor now serving (a restart replaces it)."""
        return self.services.models[MODEL].handle

    @property
    def info(self) -> dict[str, Any]:
        """What the serving actor's start() returned."""
        return self.services.models[MODEL].info

    @property
    def api_base(self) -> str:
        return self.info["api_base"]

    def stop(self) -> ServerStop:
        """Stop the server and its actor (idempotent); the shared fixture starts a fresh one for the next user."""
        if self.stopped is not None:
            return self.stopped
        import ray

        from mkb_ray.campaign.services import _wait_name_free

        handle, info = self.handle, self.info
        pids = ray.get(handle.pids.remote(), timeout=60)
        report = ray.get(handle.stop.remote(), timeout=STOP_TIMEOUT_S)
        ray.kill(handle)
        # A killed named actor frees its name later: the next server must not find it.
        _wait_name_free(f"mkb-model-server:{MODEL}")
        self.services.models.pop(MODEL, None)
        self.stopped = ServerStop(report, pids, processes.alive(pids), info["port"], processes.port_open(info["port"]))
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
        """The running server, started the way `mkb run` starts its models (ModelServices) if none runs."""
        if self._server is None or self._server.stopped is not None:
            from mkb_ray.campaign.services import ModelServices
            from mkb_ray.models.roster import get_model

            ray = self.ray()
            services = ModelServices()
            began = time.monotonic()
            services.start([get_model(MODEL)])
            startup_s = time.monotonic() - began
            taken = ray.cluster_resources().get("CPU", 0) - ray.available_resources().get("CPU", 0)
            self._server = SharedServer(services, startup_s, taken)
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
