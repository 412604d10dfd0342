"""The kernel process's loop: import one candidate, run `solve` on the views of the exchange buffer it is handed.

Everything here runs next to hostile code and is treated as such by the checker: a reply can only make the
checker reject (a check name from a fixed list and a reason), or say "done" — whether the outputs are right, how
long the call took and the verdict are the checker's to decide. The loop itself holds nothing a kernel could use:
no reference, no anchor, no schedule, no verdict (see problems/CONTRACT.md, "Trust model").

Messages are JSON lines: requests on stdin, replies on the protocol fd; fd 1 is pointed at the log (stderr)
before any candidate code runs, so what a kernel prints is only ever log.
"""
from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Optional, TextIO

import torch

from .draw_clock import DrawClock, DrawTime
from .evidence import cpu_profiler, summarise, summarise_cpu, wall_share
from .exchange import TensorSlot, open_exchange, view
from .guards import IdentityGuard, ProcessGuard, ThreadGuard, carries_dsl_values, output_type_problems
from .launches import LaunchMonitor


class Rejection(Exception):
    """The call (or the load) broke the contract; `check` names the rule."""

    def __init__(self, check: str, reason: str) -> None:
        super().__init__(reason)
        self.check, self.reason = check, reason[:4000]


def _import_path(path: Path, module_name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: cannot be imported as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # torch.compile (of a reference) re-imports what it traces
    spec.loader.exec_module(module)
    return module


def _flatten(result: Any) -> list[Any]:
    # Exactly these containers: a subclass could compute its items lazily, after the call returned.
    if result is None:
        return []
    if type(result) in (tuple, list):
        return list(result)
    if type(result) is torch.Tensor:
        return [result]
    raise Rejection("output_type", f"solve returned a {type(result).__name__}; return a torch.Tensor, or a plain "
                    "tuple or list of them")


class KernelRunner:
    """State of one kernel process: the exchange views, the loaded `solve`, the monitor (for candidates)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.solve: Optional[Callable[..., Any]] = None
        self.monitor: Optional[LaunchMonitor] = None
        self.identity: Optional[IdentityGuard] = None
        self.threads: Optional[ThreadGuard] = None
        self.processes: Optional[ProcessGuard] = None
        self.banks: list[tuple[list[Any], list[torch.Tensor]]] = []  # (inputs, outputs) views per bank
        self.inputs: list[Any] = []  # the bank being called
        self.outputs: list[torch.Tensor] = []
        self.mutates: list[int] = []
        self.privates: Optional[list[list[Any]]] = None  # a compiled baseline's own copies of each bank's inputs
        self.private: Optional[list[Any]] = None
        self.on_gpu = False
        self.clock: Optional[DrawClock] = None  # on a GPU: the device's record of every call (draw_clock.py)
        self.draw_times: list[DrawTime] = []  # the current round trip's, one per bank called
        self.slot_spans: list[tuple[int, int]] = []  # memory of every bank's output slots (never handed to solve)

    # ----- requests -------------------------------------------------------------------------------------
    def attach(self, message: dict[str, Any]) -> dict[str, Any]:
        self.on_gpu = message["device"] == "cuda"
        buffer = open_exchange(message["buffer"], self.workdir / "exchange")
        if self.on_gpu and torch.cuda.is_available():
            self.clock = DrawClock(flush_l2=bool(message.get("flush_l2", True)))
        self.banks = [([view(buffer, TensorSlot.from_json(item["slot"])) if "slot" in item else item["value"]
                        for item in bank["inputs"]],
                       [view(buffer, TensorSlot.from_json(slot)) for slot in bank["outputs"]])
                      for bank in message["banks"]]
        self.inputs, self.outputs = self.banks[0]
        self.slot_spans = [_span(out) for _, outputs in self.banks for out in outputs]
        self.mutates = [int(i) for i in message["mutates"]]
        return {"ok": True}

    def load(self, message: dict[str, Any]) -> dict[str, Any]:
        path = self.workdir / "input" / str(message["file"])
        if message["kind"] == "reference":  # a baseline process: the problem's own reference, no monitor
            module = _import_path(path, "mkb_problem")
            for name, value in message.get("overrides", {}).items():
                setattr(module, name, value)
            self.solve = torch.no_grad()(module.reference)
            if message.get("torch_compile"):
                self.solve = torch.compile(self.solve)
                # torch.compile refuses to mutate inputs that share one storage with other dtypes (the exchange):
                # the compiled baseline runs on private copies, refreshed by an untimed 'stage' before each call.
                self.privates = [[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
                                 for inputs, _ in self.banks]
            return {"ok": True}
        if message["kind"] == "noop":  # the harness's own cost, measured where no candidate ever ran
            # Returns fresh outputs, as a kernel does: the reply path then copies them into the slots, and that
            # device work (with the switch between the two processes' GPU contexts) is calibrated too.
            self.solve = lambda *inputs: tuple(torch.empty_like(out) for out in self.outputs)
            return {"ok": True}
        cache = message.get("ptx_cache_dir")
        self.monitor = LaunchMonitor(has_gpu=self.on_gpu and torch.cuda.is_available(),
                                     ptx_cache_dir=Path(cache) if cache else None)
        self.monitor.install(str(message["dsl"]))
        self.identity = IdentityGuard(self.monitor.patched)
        self.threads = ThreadGuard()
        self.processes = ProcessGuard()
        try:
            module = _import_path(path, "mkb_candidate")
        except Exception as err:
            raise Rejection("import", f"importing the kernel failed: {type(err).__name__}: {err}") from err
        solve = getattr(module, "solve", None)
        if not callable(solve):
            raise Rejection("import", "the kernel file defines no callable solve(*inputs)")
        self.solve = solve
        return {"ok": True}

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        """`solve` on each bank the checker lists, in its order (a timed round trip carries several draws); one
        reply, the last call's, unless a call was rejected."""
        order = [int(b) for b in message.get("banks", [0])]
        if not order or any(not 0 <= b < len(self.banks) for b in order):
            raise ValueError(f"banks {order} outside the {len(self.banks)} attached")
        reply: dict[str, Any] = {"ok": True}
        self.draw_times = []
        try:
            for bank in order:
                self.inputs, self.outputs = self.banks[bank]
                self.private = self.privates[bank] if self.privates is not None else None
                reply = self._call_one(message)
        finally:
            self.inputs, self.outputs = self.banks[0]
        if self.draw_times:  # the device's record, per bank in the order called; the checker bounds it
            reply["device_ms"] = [t.counted_ms for t in self.draw_times]
            reply["late_draws"] = sum(t.late for t in self.draw_times)
        return reply

    def _call_one(self, message: dict[str, Any]) -> dict[str, Any]:
        mode = str(message.get("mode", "execute"))
        profile, timed = bool(message.get("profile")), bool(message.get("timed"))
        monitor = self.monitor
        if monitor is not None:
            monitor.begin_call(mode)
        before = [(t.data_ptr(), t.untyped_storage().data_ptr()) if isinstance(t, torch.Tensor) else None
                  for t in self.inputs]
        profiler = None
        try:
            if self.clock is not None:
                self.clock.prepare()
            if profile:
                if self.on_gpu:  # the device's own record of every kernel that ran
                    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                                  torch.profiler.ProfilerActivity.CUDA])
                else:  # aten operators, and numpy calls through the Python tracer
                    profiler = cpu_profiler()
                profiler.__enter__()
            arguments = self.private if self.private is not None else self.inputs
            started = time.perf_counter()
            # Every call, timed or not, ends with the device idle: a draw's time is its own, never overlapped with
            # the next draw's launches. On a GPU every call (not only timed ones) runs inside the draw clock.
            if self.clock is not None:  # a GPU that executes (compile-only hosts have none)
                result, drawn = self.clock.run(lambda: self.solve(*arguments))  # type: ignore[misc]
                self.draw_times.append(drawn)
            else:
                result = self.solve(*arguments)  # type: ignore[misc]
                if self.on_gpu:
                    torch.cuda.synchronize()
            solve_us = (time.perf_counter() - started) * 1e6
        except Rejection:
            raise
        except Exception as err:
            self._raise_from_solve(err)
        finally:
            if profiler is not None:
                profiler.__exit__(None, None, None)
            record = monitor.end_call() if monitor is not None else None
        produced = _flatten(result)
        if len(produced) != len(self.outputs):
            raise Rejection("correctness", f"solve returned {len(produced)} outputs, expected {len(self.outputs)}")
        self._check_in_place(before)
        reply: dict[str, Any] = {"ok": True}
        if monitor is not None and record is not None:
            reply.update(self._integrity(record, produced, mode, timed))
            if mode == "execute":
                # Where the call's wall time went: inside the DSL's launches, or anywhere else (eager PyTorch,
                # numpy, Python, other threads the call waited for). Evidence only (see evidence.py); the launching
                # thread's CPU time inside the launches is what the profiled-twin rule reads.
                reply["wall"] = {**wall_share(solve_us, record.launch_us).as_json(),
                                 "dsl_cpu_us": record.launch_cpu_us}
            if profiler is not None:
                evidence = (summarise(profiler, monitor.compiled_kernels) if self.on_gpu
                            else summarise_cpu(profiler, record.launch_us))
                reply["evidence"] = evidence.as_json()
        for index, (out, slot) in enumerate(zip(produced, self.outputs)):
            if not isinstance(out, torch.Tensor):
                raise Rejection("correctness", f"output {index}: expected a tensor, got {type(out).__name__}")
            if self.monitor is not None and _overlaps(_span(out), self.slot_spans):
                # solve is never handed a slot: writing into one was found behind the harness's back, and its copy
                # into the slot (timed for every kernel, and taken off as the no-op's cost) would be skipped.
                raise Rejection("output_type", f"output {index} shares memory with the judge's output slots, which "
                                "solve is never handed; return tensors of your own")
            if tuple(out.shape) != tuple(slot.shape) or out.dtype != slot.dtype:
                raise Rejection("correctness", f"output {index}: {out.dtype} {tuple(out.shape)} != expected "
                                f"{slot.dtype} {tuple(slot.shape)}")
            slot.copy_(out)
        if self.on_gpu:
            torch.cuda.synchronize()
        return reply

    # ----- checks the kernel process can make about itself --------------------------------------------
    def _raise_from_solve(self, err: Exception) -> None:
        monitor = self.monitor
        from_dsl = type(err).__module__.split(".")[0] in ("tvm", "tvm_ffi", "cutlass")
        if monitor is not None and (monitor.compile_error or (from_dsl and monitor.current.launches == 0)):
            message = monitor.compile_error or f"{type(err).__name__}: {err}"
            monitor.compile_error = message
            raise Rejection("compile", f"compile failed: {message}")
        raise Rejection("runtime", f"solve raised {type(err).__name__}: {err}")

    def _check_in_place(self, before: list[Any]) -> None:
        for index in self.mutates:
            tensor, pointers = self.inputs[index], before[index]
            if pointers is None:
                continue
            if (tensor.data_ptr(), tensor.untyped_storage().data_ptr()) != pointers:
                raise Rejection("in_place", f"input {index} was re-pointed at other storage (set_/resize_) instead "
                                "of being written in place; the caller's buffer never changed")

    def _integrity(self, record: Any, produced: list[Any], mode: str, timed: bool) -> dict[str, Any]:
        assert self.monitor is not None and self.identity is not None and self.threads is not None \
            and self.processes is not None
        patched = self.identity.violations(full=not timed)  # the cheap check only, between timed draws
        if patched:
            self.identity.restore()
            raise Rejection("monkey_patch", f"the submission replaced {', '.join(patched)}")
        modes = torch._C._len_torch_function_stack() + torch._C._len_torch_dispatch_stack()
        if modes:
            raise Rejection("monkey_patch", f"solve left {modes} torch function/dispatch mode(s) pushed: they would "
                            "intercept every later torch call in this process")
        threads = self.threads.new_threads()
        if threads:
            raise Rejection("threads", f"the submission left threads running: {threads}")
        processes = self.processes.new_processes()
        if processes:
            raise Rejection("threads", f"the submission left processes running: {', '.join(processes[:5])}")
        if record.launches == 0 and self.monitor.mode != "compile_only":
            raise Rejection("dsl_launch", "solve launched no kernel of the variant's DSL (launch compiled kernels "
                            "from the DSL's compile entry point; eager PyTorch alone is not a submission)")
        outputs = produced + [self.inputs[i] for i in self.mutates]
        problems = output_type_problems(outputs, "cuda" if self.on_gpu else "cpu")
        if problems:
            raise Rejection("output_type", "; ".join(problems))
        reply: dict[str, Any] = {"launches": record.launches, "stub_launches": record.stub_launches}
        if mode == "probe":
            reply["copy_only"] = bool(record.copy_only) and all(record.copy_only)
            reply["uncomputed"] = [i for i, out in enumerate(outputs) if isinstance(out, torch.Tensor)
                                   and out.numel() and not carries_dsl_values(out, record.computed)]
        if record.stub_launches:
            reply["compiles"] = [vars(c) for c in self.monitor.compiles]
        return reply

    def stage(self) -> dict[str, Any]:
        for privates, (inputs, _) in zip(self.privates or [], self.banks):
            for private, shared in zip(privates, inputs):
                if isinstance(private, torch.Tensor):
                    private.copy_(shared)
        if self.on_gpu:
            torch.cuda.synchronize()
        return {"ok": True}

    def compiles(self) -> dict[str, Any]:
        monitor = self.monitor
        return {"ok": True, "compiles": [vars(c) for c in monitor.compiles] if monitor else [],
                "compile_error": monitor.compile_error if monitor else None}


def _span(tensor: torch.Tensor) -> tuple[int, int]:
    """The bytes a tensor's elements cover, [first, last + 1)."""
    if tensor.numel() == 0:
        return (tensor.data_ptr(), tensor.data_ptr())
    last = sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))
    return (tensor.data_ptr(), tensor.data_ptr() + (last + 1) * tensor.element_size())


def _overlaps(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in spans)


def serve(requests: TextIO, replies: TextIO, workdir: Path) -> None:
    """Answer requests until 'exit' or end of input."""
    runner = KernelRunner(workdir)
    handlers = {"attach": runner.attach, "load": runner.load, "call": runner.call,
                "stage": lambda message: runner.stage(),
                "compiles": lambda message: runner.compiles()}
    replies.write(json.dumps({"ready": True, "pid_started": time.time()}) + "\n")
    replies.flush()
    for line in requests:
        message = json.loads(line)
        op = message.get("op")
        if op == "exit":
            return
        try:
            reply = handlers[op](message)
        except Rejection as rejection:
            reply = {"ok": False, "check": rejection.check, "reason": rejection.reason}
        except Exception as err:  # our own failure in this process: reported, the checker decides
            reply = {"ok": False, "check": "runtime", "reason": f"{type(err).__name__}: {err}"[:4000]}
        replies.write(json.dumps(reply, default=str) + "\n")
        replies.flush()
