"""A Ray cluster that the real autoscaler grows and shrinks, on this one machine and on loopback only: Ray's
fake multi-node provider (`fake_multinode`), where each "node" the autoscaler launches is one more raylet here.

Why not `ray.cluster_utils.AutoscalingCluster`: it runs `ray stop --force` (killing every Ray on the machine, a
CI run's included), binds the GCS to port 6379 on the machine's address, and reads an example YAML that the wheel
does not ship. This one starts `ray start --head` on 127.0.0.1 at a free port with a temp dir of its own, and
stops exactly the processes whose command line names that temp dir (the head's, the autoscaler's and every
worker node's: they all log into it).

Used by tests/test_fake_cluster.py and `benchmarks/scheduler_scale.py --fake-nodes`.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import psutil

from ..models.local_ray import WORKER_NICENESS

# Ray's environment for a fake multi-node head: the provider refuses to start without RAY_FAKE_CLUSTER, and the
# autoscaler's default 5 s update interval would make every scale-up and scale-down test wait minutes.
_FAKE_ENV = {"RAY_FAKE_CLUSTER": "1", "AUTOSCALER_UPDATE_INTERVAL_S": "1",
             "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",   # loopback only (mkb_ray/models/local_ray.py says why)
             "RAY_worker_niceness": str(WORKER_NICENESS),  # workers not below the machine's other processes (ditto)
             # Token auth is Ray's default once ~/.ray/auth_token exists; a loopback test cluster does not need
             # it, and a driver that does not find the token would be refused.
             "RAY_AUTH_MODE": "disabled"}


@dataclass(frozen=True)
class NodeType:
    """A worker node type: what one node offers and how many the autoscaler may run."""

    name: str
    resources: dict[str, float]
    min_workers: int = 0
    max_workers: int = 1
    object_store_mb: int = 100   # a small object store: every fake node's lives in this machine's memory


@dataclass
class FakeCluster:
    node_types: list[NodeType]
    head_resources: dict[str, float] = field(default_factory=lambda: {"CPU": 0})
    idle_timeout_s: float = 6.0
    head_object_store_mb: int = 200
    address: Optional[str] = None
    temp_dir: Optional[Path] = None

    @property
    def env(self) -> dict[str, str]:
        """The environment a driver of this cluster needs (and `ray` CLI calls against it)."""
        return {"RAY_ADDRESS": self.address or "", **{k: v for k, v in _FAKE_ENV.items()
                                                      if k != "AUTOSCALER_UPDATE_INTERVAL_S"}}

    def config(self, gcs_address: str) -> dict[str, Any]:
        """The autoscaler config handed to the head (the same schema as experiments/clusters/aws-vm.yaml)."""
        types: dict[str, Any] = {
            "ray.head.default": {"resources": {}, "node_config": {}, "max_workers": 0}}
        for node_type in self.node_types:
            types[node_type.name] = {
                "resources": {**node_type.resources, "object_store_memory": node_type.object_store_mb * 2**20},
                "node_config": {}, "min_workers": node_type.min_workers, "max_workers": node_type.max_workers}
        return {
            "cluster_name": "mkb-fake", "max_workers": sum(t.max_workers for t in self.node_types),
            "idle_timeout_minutes": self.idle_timeout_s / 60.0, "upscaling_speed": 10.0,
            "provider": {"type": "fake_multinode", "gcs_address": gcs_address, "use_node_id_as_ip": True,
                         "disable_node_updaters": True, "disable_launch_config_check": True},
            "available_node_types": types, "head_node_type": "ray.head.default", "auth": {}, "docker": {},
            "file_mounts": {}, "cluster_synced_files": [], "file_mounts_sync_continuously": False,
            "rsync_exclude": [], "rsync_filter": [], "initialization_commands": [], "setup_commands": [],
            "head_setup_commands": [], "worker_setup_commands": [], "head_start_ray_commands": [],
            "worker_start_ray_commands": []}

    def start(self) -> str:
        """Start the head (its autoscaler then starts worker nodes on demand); returns the cluster address."""
        port = _free_port()
        gcs = f"127.0.0.1:{port}"
        # Short: Ray puts unix sockets under the temp dir, and a socket path has a 107-byte limit.
        self.temp_dir = Path(tempfile.mkdtemp(prefix="mkbfk-", dir="/tmp"))
        config_path = self.temp_dir / "autoscaler.json"
        config_path.write_text(json.dumps(self.config(gcs)))
        resources = {k: v for k, v in self.head_resources.items() if k not in ("CPU", "GPU")}
        command = [_ray_cli(), "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                   f"--autoscaling-config={config_path}", f"--temp-dir={self.temp_dir}",
                   f"--num-cpus={self.head_resources.get('CPU', 0)}",
                   f"--num-gpus={self.head_resources.get('GPU', 0)}",
                   f"--object-store-memory={self.head_object_store_mb * 2**20}",
                   "--include-dashboard=false", "--disable-usage-stats"]
        if resources:
            command.append(f"--resources={json.dumps(resources)}")
        result = subprocess.run(command, env={**os.environ, **_FAKE_ENV}, capture_output=True, text=True,
                                timeout=120)
        if result.returncode != 0:
            self.stop()
            raise RuntimeError(f"the fake cluster's head did not start: {result.stderr[-2000:]}")
        self.address = gcs
        return gcs

    def processes(self) -> list[psutil.Process]:
        """Every live process of this cluster (head, autoscaler, worker nodes, their workers)."""
        if self.temp_dir is None:
            return []
        marker = str(self.temp_dir)
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if any(marker in arg for arg in proc.info["cmdline"] or ()):
                    found.append(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return found

    def worker_raylets(self) -> list[psutil.Process]:
        """The raylets of the worker nodes now up (the head's is the one the `ray start` CLI started: parent 1
        or the CLI; worker nodes' are children of the autoscaler's monitor process)."""
        procs = self.processes()
        monitors = {p.pid for p in procs if any("monitor.py" in a for a in _cmdline(p))}
        return [p for p in procs if _is_raylet(p) and _parent(p) in monitors]

    def kill_worker_node(self) -> int:
        """Kill one worker node as a lost machine would go: its raylet and every process under it (the workers
        running its tasks: a worker whose raylet alone died would still finish its task and report it to the
        task's owner directly). The node with the most processes is chosen, the busiest. Returns the raylet's pid."""
        raylets = self.worker_raylets()
        if not raylets:
            raise RuntimeError("no worker node is up")
        victim = max(raylets, key=lambda p: len(_descendants(p)))
        _kill_all([*_descendants(victim), victim])
        return victim.pid

    def stop(self) -> None:
        _kill_all(self.processes())
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
        self.address = None

    def __enter__(self) -> "FakeCluster":
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _ray_cli() -> str:
    here = Path(sys.executable).parent / "ray"
    return str(here) if here.exists() else "ray"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


def _kill_all(procs: list[psutil.Process]) -> None:
    """SIGKILL each process (gone already is fine) and wait until they are all gone."""
    for proc in procs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10)


def _descendants(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _is_raylet(proc: psutil.Process) -> bool:
    args = _cmdline(proc)
    return bool(args) and os.path.basename(args[0]) == "raylet"


def _parent(proc: psutil.Process) -> Optional[int]:
    try:
        return proc.ppid()
    except psutil.NoSuchProcess:
        return None
