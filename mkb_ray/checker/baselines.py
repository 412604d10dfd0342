"""Eager and torch.compile baselines, and the harness's no-op cost: measured in a baseline process (a kernel
process that never saw a candidate), through the same round trip as the kernel, and cached.

Cache key: problem hash, preset shapes, the input protocol (warm-up and timed draws, timing method), the device
(GPU name, driver, torch version). One entry per key in `<cache_dir>/<key>.json`; every `REMEASURE_EVERY`-th
use re-measures and records the drift, so a machine that changed under a cache is noticed.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, ContextManager, Optional

import torch

from .kernel_process import ForkedChannels, KernelProcess, Rejected
from .session import READY_TIMEOUT_S, KernelSession, copy_into
from .timing import RoundTripTimer, TimedSeries, method_name, time_draws

CACHE_VERSION = 2  # 2: device times (CUDA events) beside the round trips
REMEASURE_EVERY = 20
CALL_TIMEOUT_S = 300.0


@dataclass
class Baselines:
    eager_ms: float  # the checker's round trip per draw, raw (the no-op's not taken off)
    torch_compile_ms: Optional[float]
    noop_ms: float  # the harness's round trip for a solve that does nothing
    eager_device_ms: Optional[float] = None  # on a GPU: the device's record of the eager call (CUDA events)
    torch_compile_device_ms: Optional[float] = None
    source: str = "measured"  # 'measured' | 'cached'
    uses: int = 0
    drift: Optional[float] = None  # re-measured eager / cached eager, when this use re-measured
    note: Optional[str] = None  # why a baseline is missing


def device_fingerprint(on_gpu: bool) -> dict[str, str]:
    if on_gpu:
        props = torch.cuda.get_device_properties(0)
        return {"device": props.name, "driver": str(torch.cuda.driver_version() if hasattr(torch.cuda, "driver_version")
                                                     else torch.version.cuda), "torch": torch.__version__}
    model = "cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"device": model, "cpus": str(os.cpu_count()), "torch": torch.__version__}


def cache_key(problem_hash: str, shapes: dict[str, Any], warmup: int, timed: int, compile_baseline: bool,
              on_gpu: bool, per_trip: int = 1, flush_l2: bool = True) -> str:
    material = {"version": CACHE_VERSION, "problem": problem_hash, "shapes": shapes, "warmup": warmup,
                "timed": timed, "compile": compile_baseline, "method": method_name(on_gpu, per_trip, flush_l2),
                **device_fingerprint(on_gpu)}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:32]


def measure(problem_path: Path, overrides: dict[str, Any], draw: Callable[[int], list[Any]], outputs: list[Any],
            mutates: list[int], on_gpu: bool, warmup: int, timed: int, compile_baseline: bool,
            writable: tuple[str, ...] = (), per_trip: int = 1, flush_l2: bool = True,
            alone: Callable[[], ContextManager[Any]] = contextlib.nullcontext,
            idle: Callable[[], ContextManager[Any]] = contextlib.nullcontext,
            forked: Optional[ForkedChannels] = None) -> Baselines:
    """Start a baseline process (or take `forked`, one the pool forked from its kernel template for this checker)
    and time the no-op, eager and (optionally) torch.compile references in it, with the kernel's `per_trip` draws
    per round trip; the timing inside `alone()`, the process start (imports, no device work to speak of) inside
    `idle()`."""
    device_type = "cuda" if on_gpu else "cpu"
    process = KernelProcess(on_gpu, writable=writable, role="baseline", forked=forked)
    try:
        with idle():
            process.wait_ready(READY_TIMEOUT_S)
    except BaseException:
        process.close()
        raise
    session = KernelSession(process, device_type, draw(0), outputs, mutates, banks=per_trip, flush_l2=flush_l2)
    try:
        name = copy_into(session.process, problem_path, "problem.py")
        timer = RoundTripTimer(on_gpu, session.fence if on_gpu else None, flush_l2)

        def run(kind: str, seed_base: int, **load: Any) -> TimedSeries:
            session.process.request({"op": "load", "kind": kind, "file": name, "overrides": overrides, **load},
                                    CALL_TIMEOUT_S)

            def prepare(trip: range) -> None:
                for bank, index in enumerate(trip):
                    session.write_inputs(draw(seed_base + index), bank)
                if load.get("torch_compile"):
                    session.process.request({"op": "stage"}, CALL_TIMEOUT_S)

            return time_draws(timer, prepare,
                              lambda count: session.call(CALL_TIMEOUT_S, timed=True, banks=range(count)),
                              warmup, timed, per_trip=per_trip)

        with alone():
            noop = run("noop", 0)
            eager = run("reference", 2000)
        compiled: Optional[TimedSeries] = None
        note = None
        if compile_baseline:
            try:
                with alone():
                    compiled = run("reference", 3000, torch_compile=True)
            except Rejected as failed:  # the reference itself does not compile: no such baseline, said why
                note = f"torch.compile of the reference failed: {failed.reason[:300]}"
        return Baselines(eager_ms=eager.wall.median_ms, noop_ms=noop.wall.median_ms,
                         torch_compile_ms=compiled.wall.median_ms if compiled else None,
                         eager_device_ms=eager.device.median_ms if eager.device else None,
                         torch_compile_device_ms=compiled.device.median_ms if compiled and compiled.device else None,
                         note=note)
    finally:
        session.close()


def cached_or_measured(cache_dir: Optional[Path], key: str, measure_now: Callable[[], Baselines]) -> Baselines:
    """The cached baselines for `key`, re-measured every REMEASURE_EVERY-th use; measured when absent."""
    path = cache_dir / f"{key}.json" if cache_dir else None
    cached: Optional[Baselines] = None
    if path is not None and path.exists():
        try:
            stored = json.loads(path.read_text())
            cached = Baselines(**{k: v for k, v in stored.items() if k in Baselines.__annotations__})
        except (ValueError, TypeError):
            cached = None
    if cached is not None and (cached.uses + 1) % REMEASURE_EVERY != 0:
        cached.uses += 1
        cached.source = "cached"
        _write(path, cached)
        return cached
    fresh = measure_now()
    if cached is not None:
        now, then = fresh.eager_device_ms or fresh.eager_ms, cached.eager_device_ms or cached.eager_ms
        fresh.drift = now / then if then > 0 else None
        fresh.uses = cached.uses + 1
    _write(path, fresh)
    return fresh


def _write(path: Optional[Path], baselines: Baselines) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.{time.monotonic_ns()}.tmp")
    temporary.write_text(json.dumps({**asdict(baselines), "source": "measured"}))
    temporary.replace(path)
