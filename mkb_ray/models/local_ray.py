"""A local Ray that listens on 127.0.0.1 only (every service we start here must stay on loopback)."""
from __future__ import annotations

import logging
import os
import sys
from typing import Optional

logger = logging.getLogger(__name__)

LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
# Ray starts its workers at nice 15, below every other process on the machine; ours are the workload (the model
# engine, the judge's checkers and kernel processes). Beside two busy loops at nice 0, a SmolLM2 engine at nice 15
# got ~4% of a CPU and the real-model test did not finish its first attempt in 10 minutes (measured 2026-12-04; it
# takes 2 on an idle machine). At 0 they share the machine fairly with whatever else runs on it.
WORKER_NICENESS = 0


def force_loopback() -> None:
    """Make Ray (in this process and the ones it starts) pick 127.0.0.1 as the node address.

    Ray reads RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER once, when `ray` is imported: setting it after the import leaves
    gcs_server, raylet and the agents on all interfaces even with `_node_ip_address="127.0.0.1"` (measured). So the
    variable is set for child processes and, if Ray is already imported, the constant is corrected as well.
    """
    os.environ.update(LOOPBACK_ENV)
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:
        constants.ENABLE_RAY_CLUSTER = False  # type: ignore[attr-defined]


def init_local_ray(num_cpus: Optional[int] = None) -> bool:
    """Start (or join) a local Ray bound to 127.0.0.1; returns True when this call started it."""
    force_loopback()
    import ray

    if ray.is_initialized():
        return False
    cpus = num_cpus or os.cpu_count() or 1
    ray.init(num_cpus=cpus, _node_ip_address="127.0.0.1", include_dashboard=False, configure_logging=False,
             log_to_driver=False, _system_config={"worker_niceness": WORKER_NICENESS})
    logger.info("started a local Ray on 127.0.0.1 (%d CPUs)", cpus)
    return True
