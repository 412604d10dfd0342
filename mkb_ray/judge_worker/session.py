"""A kernel process plus the exchange buffer it shares with the checker: draws go in, outputs come out.

The checker computes everything it will compare on its own private tensors; the exchange only ever receives
copies. After a call it copies the outputs (and the buffers the problem mutates) out again before looking at
them, and checks that the inputs `solve` was not allowed to change are as it wrote them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

import torch

from ..kernel_runner.exchange import ExchangeBuffer, plan_slots, view
from .kernel_process import KernelProcess

READY_TIMEOUT_S = 120.0


class KernelSession:
    """Owns one `KernelProcess` and its exchange; the layout is fixed by the first draw and its outputs."""

    def __init__(self, process: KernelProcess, device_type: str, first_inputs: Sequence[Any],
                 outputs: Sequence[torch.Tensor], mutates: Sequence[int]) -> None:
        self.process, self.device_type, self.mutates = process, device_type, list(mutates)
        tensors = [x if isinstance(x, torch.Tensor) else None for x in first_inputs]
        self.input_slots, end = plan_slots(tensors)
        self.output_slots, end = plan_slots(list(outputs), end)
        self.exchange = ExchangeBuffer(end, device_type, process.exchange_dir)
        self.input_views = [view(self.exchange.tensor, s) if s is not None else None for s in self.input_slots]
        self.output_views = [view(self.exchange.tensor, s) for s in self.output_slots if s is not None]
        self.scalars = [None if isinstance(x, torch.Tensor) else x for x in first_inputs]
        self._written: list[Any] = []
        fence_slots = [s for s in self.output_slots if s is not None]
        fence_slots += [self.input_slots[i] for i in self.mutates if self.input_slots[i] is not None]
        self._fence_index = torch.tensor([s.offset for s in fence_slots] or [0], device=device_type)
        process.wait_ready(READY_TIMEOUT_S)
        items = [{"slot": s.as_json()} if s is not None else {"value": v}
                 for s, v in zip(self.input_slots, self.scalars)]
        process.request({"op": "attach", "device": device_type, "buffer": self.exchange.description,
                         "inputs": items, "outputs": [s.as_json() for s in self.output_slots if s is not None],
                         "mutates": self.mutates}, READY_TIMEOUT_S)

    def write_inputs(self, inputs: Sequence[Any]) -> None:
        """Copy one draw into the exchange (shapes, dtypes and scalars must match the first draw's)."""
        if len(inputs) != len(self.input_slots):
            raise ValueError(f"the problem drew {len(inputs)} inputs, then {len(self.input_slots)}")
        for index, (value, target, slot) in enumerate(zip(inputs, self.input_views, self.input_slots)):
            if slot is None:
                if isinstance(value, torch.Tensor) or value != self.scalars[index]:
                    raise ValueError(f"input {index} changed kind or value across draws; the judge needs fixed "
                                     "scalar inputs and tensor shapes within one preset")
                continue
            assert target is not None
            if tuple(value.shape) != slot.shape or value.dtype != target.dtype:
                raise ValueError(f"input {index} changed shape or dtype across draws ({tuple(value.shape)} "
                                 f"{value.dtype} vs {slot.shape} {slot.dtype})")
            target.copy_(value)
        self._written = list(inputs)
        if self.device_type == "cuda":
            torch.cuda.synchronize()

    def call(self, timeout_s: float, mode: str = "execute", timed: bool = False,
             profile: bool = False) -> dict[str, Any]:
        return self.process.request({"op": "call", "mode": mode, "timed": timed, "profile": profile}, timeout_s)

    def fence(self) -> None:
        """Read one byte of every output slot and wait for it (see timing.py)."""
        self.exchange.tensor[self._fence_index].sum().item()

    def read_outputs(self) -> list[Any]:
        """Private copies of the returned outputs, then of the mutated inputs (the MetaKernelBench order)."""
        produced: list[Any] = [v.clone() for v in self.output_views]
        for index in self.mutates:
            target = self.input_views[index]
            produced.append(target.clone() if target is not None else self.scalars[index])
        return produced

    def unchanged_inputs_problem(self) -> Optional[str]:
        """Which input `solve` changed although the problem does not list it as mutated (None: none)."""
        for index, (target, value) in enumerate(zip(self.input_views, self._written)):
            if target is None or index in self.mutates:
                continue
            if not torch.equal(target.reshape(-1).view(torch.uint8), value.contiguous().reshape(-1).view(torch.uint8)):
                return (f"input {index} changed during solve, but the problem does not mutate it (inputs that are "
                        "not outputs must be left as they were)")
        return None

    def close(self) -> None:
        self.process.close()
        self.exchange.close()


def copy_into(process: KernelProcess, source: Path, name: str) -> str:
    """Place a file (the candidate, or a baseline's problem file) where the kernel process can read it."""
    target = process.input_dir / name
    target.write_bytes(source.read_bytes())
    target.chmod(0o644)
    return name


__all__ = ["KernelSession", "copy_into"]
