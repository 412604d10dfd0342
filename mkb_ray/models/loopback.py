"""Keep Ray Serve's replica gRPC servers on loopback (a Ray `worker_process_setup_hook`).

Ray Serve 2.60 binds every replica's internal gRPC server to all interfaces (`"[::]:0"` hard-coded in
`ray/serve/_private/replica.py`); on the machines we run on every listener must be on 127.0.0.1. The hook runs in
each worker process before it becomes a replica and swaps the bind address. Ray imports it by dotted name
(`LOOPBACK_HOOK`), so this module stays dependency-free apart from Ray itself.
"""
from __future__ import annotations

from typing import Any

LOOPBACK_HOOK = "mkb_ray.models.loopback.bind_serve_grpc_to_loopback"
# Ray turns `runtime_env["worker_process_setup_hook"]` into this environment variable only for a job's runtime_env
# (in `ray.init`); an actor's runtime_env (what a Serve replica gets) must carry the variable itself, or the hook
# silently never runs. Pinned to ray 2.60's `ray_constants.WORKER_PROCESS_SETUP_HOOK_ENV_VAR` (a test checks it).
SETUP_HOOK_ENV_VAR = "__RAY_WORKER_PROCESS_SETUP_HOOK_ENV_VAR"


def loopback_runtime_env(env_vars: dict[str, str] | None = None) -> dict:
    """A replica runtime_env that runs the loopback hook in the worker process, plus `env_vars`."""
    return {"worker_process_setup_hook": LOOPBACK_HOOK,
            "env_vars": {**(env_vars or {}), SETUP_HOOK_ENV_VAR: LOOPBACK_HOOK}}


def _loopback_address(address: str) -> str:
    """`[::]:0` / `0.0.0.0:N` -> `127.0.0.1:<same port>`; anything else is left alone."""
    host, _, port = address.rpartition(":")
    if host in ("[::]", "0.0.0.0", "", "::"):
        return f"127.0.0.1:{port or '0'}"
    return address


def bind_serve_grpc_to_loopback() -> None:
    """Wrap the helper the replica module binds its gRPC server with (idempotent)."""
    from ray.serve._private import replica

    original = replica.add_port_to_grpc_server
    if getattr(original, "_mkb_loopback", False):
        return

    def add_port_on_loopback(server: Any, address: str) -> int:
        return original(server, _loopback_address(address))

    add_port_on_loopback._mkb_loopback = True  # type: ignore[attr-defined]
    replica.add_port_to_grpc_server = add_port_on_loopback
