"""`mkb serve MODEL`: serve one roster model in the foreground until Ctrl-C.

It starts a local Ray on 127.0.0.1, runs the ModelServer in this process (no actor: nothing else shares it), prints
the endpoint and how to reach it with litellm, and on Ctrl-C or SIGTERM stops everything it started.
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Optional

logger = logging.getLogger(__name__)

HELP = "serve a roster model on 127.0.0.1 in the foreground (Ctrl-C stops it)"
DESCRIPTION = ("Start the roster model's OpenAI-compatible endpoint (vLLM; Ray Serve LLM by default, on the CPU "
               "backend where there is no GPU) and print it. `mkb serve smollm2` serves the embedded default.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="roster name (experiments/models/<name>.yaml), e.g. smollm2")
    parser.add_argument("--roster-dir", type=Path, help="a folder of roster YAMLs (default: experiments/models)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--backend", choices=["auto", "ray_serve_llm", "vllm_subprocess"], default="auto",
                        help="auto: Ray Serve LLM, falling back to a plain vLLM process on CPU only")
    parser.add_argument("--device", choices=["roster", "cuda"], default="roster",
                        help="roster: where the roster puts the model (smollm2: CPU); cuda: on one GPU per "
                             "tensor-parallel rank, CPU-roster models too (`mkb serve smollm2 --device cuda`)")
    parser.add_argument("--gpu-fraction", type=float, default=1.0, metavar="F",
                        help="with --device cuda: the share of the GPU the replica takes (and of its memory), "
                             "leaving the rest to a judge on the same GPU (default 1)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    return serve_main(args.model, roster_dir=args.roster_dir, port=args.port, backend=args.backend,
                      device=args.device, gpu_fraction=args.gpu_fraction)


def serve_main(model: str, roster_dir: Path | None = None, port: int = 8000, backend: str = "auto",
               device: str = "roster", gpu_fraction: float = 1.0) -> int:
    """Serve `model` on 127.0.0.1:`port` until interrupted. Exit codes: 0 stopped cleanly, 1 failed, 2 bad usage."""
    from mkb_ray.models.roster import RosterError, get_model

    try:
        spec = get_model(model, roster_dir)
    except (KeyError, RosterError) as err:
        print(f"mkb serve: {err.args[0] if err.args else err}", file=sys.stderr)
        return 2
    if not spec.is_local:
        print(f"mkb serve: '{model}' is reached through its API provider ({spec.api_litellm_id}); "
              f"nothing to serve", file=sys.stderr)
        return 2
    if not 0 < gpu_fraction <= 1 or (gpu_fraction < 1 and device != "cuda" and not spec.num_gpus):
        print(f"mkb serve: --gpu-fraction {gpu_fraction}: must be in (0, 1], and below 1 only on a GPU",
              file=sys.stderr)
        return 2
    if device == "cuda":
        spec = spec.on_gpu()

    from mkb_ray.actors.model_server import ModelServer
    from mkb_ray.models.serve_config import GpuShare
    from mkb_ray.models.local_ray import init_local_ray

    stop = threading.Event()

    def on_signal(signum: int, frame: Optional[FrameType]) -> None:
        stop.set()

    # Ray Serve LLM logs every deployment option at INFO on this terminal; the endpoint line is what matters here.
    for name in ("ray.serve", "ray.llm"):
        logging.getLogger(name).setLevel(logging.WARNING)
    started_ray = init_local_ray()
    # After Ray's start: its core worker installs a SIGTERM handler that aborts the process (no clean stop, measured
    # 2026-12-06: exit -6 with the replicas left to Ray's teardown); ours must be the one that runs.
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    server = ModelServer(spec, backend=backend, port=port, gpu=GpuShare(gpu_fraction))  # type: ignore[arg-type]
    try:
        print(f"starting {spec.name} (first start converts the model and loads vLLM: about a minute on 2 cores)",
              flush=True)
        info = server.start()
        print(f"serving {info['model']} at {info['api_base']}  [{info['placement']['backend']}, "
              f"{info['startup_s']:.0f} s]", flush=True)
        print(f"  litellm: completion(model='{info['litellm_id']}', api_base='{info['api_base']}', ...)", flush=True)
        if info.get("fallback_reason"):
            print(f"  (Ray Serve LLM failed, serving with a plain vLLM process: {info['fallback_reason']})")
        print("Ctrl-C stops it.", flush=True)
        while not stop.wait(5.0):
            health = server.health()
            if not health["healthy"]:
                print(f"mkb serve: endpoint unhealthy: {health['detail']}", file=sys.stderr)
                return 1
        return 0
    except Exception as err:  # noqa: BLE001 - a failed start is reported in one line, details in the log
        logger.debug("serve failed", exc_info=True)
        print(f"mkb serve: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    finally:
        report = server.stop()
        if report.get("stopped"):
            print(f"stopped: {report['processes']} process(es) ended"
                  + (f", {len(report['force_killed'])} force-killed" if report["force_killed"] else ""), flush=True)
        if started_ray:
            import ray

            ray.shutdown()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
