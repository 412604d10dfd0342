"""Runtime guards around each `solve` call: the checks that source rules alone cannot make.

- patched functions: the identities of timers, synchronisation, comparison ops and the judge's own DSL wrappers
  are recorded before the submission is imported and compared after every call (whole torch/time/math
  namespaces after every call outside the timed loop, and once after it);
- threads: no Python thread started by the submission may outlive a call;
- outputs: plain dense `torch.Tensor`s on the expected device (no subclasses, lazy, meta or sparse tensors, which
  can lie to the comparison);
- provenance: every output must be a buffer a DSL launch computed (see `carries_dsl_values`).
"""
from __future__ import annotations

import math
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import torch


def _watched_functions(extra: dict[str, Callable[..., Any]]) -> dict[str, tuple[Any, str, Any]]:
    watched: dict[str, tuple[Any, str, Any]] = {}
    targets: list[tuple[str, Any, str]] = [
        ("time.perf_counter", time, "perf_counter"),
        ("time.perf_counter_ns", time, "perf_counter_ns"),
        ("time.time", time, "time"),
        ("time.monotonic", time, "monotonic"),
        ("time.thread_time", time, "thread_time"),
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


def _namespaces() -> dict[str, tuple[Any, bool]]:
    """Namespaces whose functions the judge relies on (comparison, input drawing, timing), by label; the flag says
    whether new entries count too: a class that gains `any` shadows the inherited `TensorBase.any`."""
    return {"torch": (torch, False), "torch.Tensor": (torch.Tensor, True), "torch.cuda": (torch.cuda, False),
            "torch.cuda.Event": (torch.cuda.Event, True), "time": (time, False), "math": (math, False)}


def _snapshot(owner: Any, whole: bool) -> dict[str, Any]:
    # A class's entries (methods, descriptors) are all fixed; of a module only functions, classes and dtypes are:
    # plain data (flags such as `torch.cuda._initialized`) changes legitimately.
    return {name: value for name, value in vars(owner).items()
            if whole or callable(value) or isinstance(value, torch.dtype)}


class IdentityGuard:
    """Detects monkey-patching of anything the judge relies on.

    `violations()` checks a short list of named functions (cheap enough for every timed call); `violations(full=True)`
    checks every function of the namespaces above, which catches patches through routes the static rules cannot
    see (`type(x).any = ...`)."""

    def __init__(self, monitor_patches: dict[str, Callable[..., Any]]) -> None:
        self._watched = _watched_functions(monitor_patches)
        self._namespaces = {label: (owner, grows, _snapshot(owner, whole=grows))
                            for label, (owner, grows) in _namespaces().items()}

    def violations(self, full: bool = False) -> list[str]:
        patched = [label for label, (owner, attr, original) in self._watched.items()
                   if getattr(owner, attr, None) is not original]
        if full:
            for label, (owner, grows, before) in self._namespaces.items():
                now = vars(owner)
                patched += [f"{label}.{name}" for name, value in before.items() if now.get(name) is not value]
                if grows:
                    patched += [f"{label}.{name}" for name in now.keys() - before.keys()]
        return sorted(set(patched))

    def restore(self) -> None:
        for owner, attr, original in self._watched.values():
            setattr(owner, attr, original)
        for owner, grows, before in self._namespaces.values():
            for name, value in before.items():
                if vars(owner).get(name) is not value:
                    setattr(owner, name, value)
            if grows:
                for name in vars(owner).keys() - before.keys():
                    delattr(owner, name)


class ThreadGuard:
    def __init__(self) -> None:
        self._baseline = {t.ident for t in threading.enumerate()}

    def new_threads(self) -> list[str]:
        return [t.name for t in threading.enumerate() if t.ident not in self._baseline and t.is_alive()]


class ProcessGuard:
    """Processes the submission started and left running: live descendants of this process (read from /proc, which in
    the sandbox shows this PID namespace only). A child can run on beside later calls and beside the judge's other
    measurements (a busy-spinning neighbour slowed the eager baseline it is compared with); a finished child that was
    not reaped is not running and does not count."""

    def __init__(self) -> None:
        self._baseline = set(_descendants())

    def new_processes(self) -> list[str]:
        return [f"pid {pid} ({name})" for pid, name in _descendants().items() if pid not in self._baseline]


def _descendants() -> dict[int, str]:
    """Live (not zombie) descendants of this process: pid -> command name."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    try:
        entries = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return {}
    for entry in entries:
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # exited meanwhile
            continue
        close = stat.rindex(")")
        state, ppid = stat[close + 2:].split()[:2]
        if state not in ("Z", "X"):
            parents[int(entry)], names[int(entry)] = int(ppid), stat[stat.index("(") + 1:close]
    me, found = os.getpid(), {}
    for pid in parents:
        ancestor, hops = parents[pid], 0
        while ancestor in parents and ancestor != me and hops < 64:
            ancestor, hops = parents[ancestor], hops + 1
        if ancestor == me:
            found[pid] = names[pid]
    return found


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


def _extent(tensor: torch.Tensor) -> tuple[int, int]:
    """The address range [start, end) a tensor's elements can touch."""
    span = sum((size - 1) * abs(stride) for size, stride in zip(tensor.shape, tensor.stride())) + 1
    return tensor.data_ptr(), tensor.data_ptr() + span * tensor.element_size()


def carries_dsl_values(out: Any, computed: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> bool:
    """Whether output `out` is what a DSL launch computed. `computed` pairs each buffer a probed launch wrote (copies
    of inputs excluded) with its values right after the launch; `out` must lie inside such a buffer, and the buffer
    must still hold those values (eager code did not overwrite it). Equal values in another tensor do not count: a
    side buffer that merely coincides with an eagerly computed output proves nothing about the output."""
    if not isinstance(out, torch.Tensor) or out.numel() == 0:
        return False
    for written, values in computed:
        if written.device != out.device:
            continue
        (out_start, out_end), (start, end) = _extent(out), _extent(written)
        if start <= out_start and out_end <= end and torch.equal(written, values):
            return True
    return False
