"""Runtime guards around each `solve` call: the checks that source rules alone cannot make.

- patched functions: the identities of timers, synchronisation, comparison ops and the judge's own DSL wrappers
  are recorded before the submission is imported and compared after every call;
- threads: no Python thread started by the submission may outlive a call;
- outputs: plain dense `torch.Tensor`s on the expected device (no subclasses, lazy, meta or sparse tensors, which
  can lie to the comparison).
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Sequence

import torch


def _watched_functions(extra: dict[str, Callable[..., Any]]) -> dict[str, tuple[Any, str, Any]]:
    watched: dict[str, tuple[Any, str, Any]] = {}
    targets: list[tuple[str, Any, str]] = [
        ("time.perf_counter", time, "perf_counter"),
        ("time.perf_counter_ns", time, "perf_counter_ns"),
        ("time.time", time, "time"),
        ("time.monotonic", time, "monotonic"),
        ("torch.cuda.synchronize", torch.cuda, "synchronize"),
        ("torch.cuda.Event", torch.cuda, "Event"),
        ("torch.cuda.Event.record", torch.cuda.Event, "record"),
        ("torch.cuda.Event.elapsed_time", torch.cuda.Event, "elapsed_time"),
        ("torch.equal", torch, "equal"),
        ("torch.isfinite", torch, "isfinite"),
        ("torch.allclose", torch, "allclose"),
        ("torch.Tensor.to", torch.Tensor, "to"),
        ("torch.Tensor.abs", torch.Tensor, "abs"),
        ("torch.Tensor.max", torch.Tensor, "max"),
        ("torch.Tensor.clone", torch.Tensor, "clone"),
        ("torch.Tensor.__sub__", torch.Tensor, "__sub__"),
        ("torch.Tensor.__ne__", torch.Tensor, "__ne__"),
        ("torch.Tensor.__eq__", torch.Tensor, "__eq__"),
    ]
    for label, owner, attr in targets:
        watched[label] = (owner, attr, getattr(owner, attr))
    for label, fn in extra.items():
        module_name, _, attr = label.rpartition(".")
        module = __import__(module_name, fromlist=[attr])
        watched[label] = (module, attr, fn)
    return watched


class IdentityGuard:
    """Detects monkey-patching of anything the judge relies on."""

    def __init__(self, monitor_patches: dict[str, Callable[..., Any]]) -> None:
        self._watched = _watched_functions(monitor_patches)

    def violations(self) -> list[str]:
        return [label for label, (owner, attr, original) in self._watched.items()
                if getattr(owner, attr, None) is not original]

    def restore(self) -> None:
        for owner, attr, original in self._watched.values():
            setattr(owner, attr, original)


class ThreadGuard:
    def __init__(self) -> None:
        self._baseline = {t.ident for t in threading.enumerate()}

    def new_threads(self) -> list[str]:
        return [t.name for t in threading.enumerate() if t.ident not in self._baseline and t.is_alive()]


def output_type_problems(outputs: Sequence[Any], device_type: str) -> list[str]:
    problems = []
    for index, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor):
            continue
        if type(out) is not torch.Tensor:
            problems.append(f"output {index} is a {type(out).__name__}, not a plain torch.Tensor")
        elif out.layout != torch.strided:
            problems.append(f"output {index} has layout {out.layout}, not strided")
        elif out.device.type != device_type:
            problems.append(f"output {index} is on {out.device.type}, expected {device_type}")
        elif out.requires_grad or out.is_meta:
            problems.append(f"output {index} is a lazy/meta or autograd-tracked tensor")
    return problems
