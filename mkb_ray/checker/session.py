"""A kernel process plus the exchange buffer it shares with the checker: draws go in, outputs come out.

The checker computes everything it will compare on its own private tensors; the exchange only ever receives
copies. After a call it copies the outputs (and the buffers the problem mutates) out again before looking at
them, and checks that the inputs `solve` was not allowed to change are as it wrote them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import torch

from ..kernel_runner.exchange import ExchangeBuffer, TensorSlot, plan_slots, view
from .kernel_process import KernelProcess

READY_TIMEOUT_S = 120.0


@dataclass
class _Bank:
    """One draw's place in the exchange: slots (and views) for its inputs and for the outputs."""

    input_slots: list[Optional[TensorSlot]]
    output_slots: list[Optional[TensorSlot]]
    input_views: list[Optional[torch.Tensor]] = field(default_factory=list)
    output_views: list[torch.Tensor] = field(default_factory=list)
    written: list[Any] = field(default_factory=list)

    def message(self, scalars: Sequence[Any]) -> dict[str, Any]:
        return {"inputs": [{"slot": s.as_json()} if s is not None else {"value": v}
                           for s, v in zip(self.input_slots, scalars)],
                "outputs": [s.as_json() for s in self.output_slots if s is not None]}


class KernelSession:
    """Owns one `KernelProcess` and its exchange; the layout is fixed by the first draw and its outputs. The
    exchange holds `banks` copies of that layout; a call names the banks it runs on, in order. On a GPU the kernel
    process flushes the L2 before every call unless `flush_l2` is off (kernel_runner/draw_clock.py)."""

    def __init__(self, process: KernelProcess, device_type: str, first_inputs: Sequence[Any],
                 outputs: Sequence[torch.Tensor], mutates: Sequence[int], banks: int = 1,
                 flush_l2: bool = True) -> None:
        self.process, self.device_type, self.mutates = process, device_type, list(mutates)
        tensors = [x if isinstance(x, torch.Tensor) else None for x in first_inputs]
        self.banks: list[_Bank] = []
        end = 0
        for _ in range(banks):
            input_slots, end = plan_slots(tensors, end)
            output_slots, end = plan_slots(list(outputs), end)
            self.banks.append(_Bank(input_slots, output_slots))
        self.exchange = ExchangeBuffer(end, device_type, process.exchange_dir)
        fence_slots: list[TensorSlot] = []
        for bank in self.banks:
            bank.input_views = [view(self.exchange.tensor, s) if s is not None else None for s in bank.input_slots]
            bank.output_views = [view(self.exchange.tensor, s) for s in bank.output_slots if s is not None]
            fence_slots += [s for s in bank.output_slots if s is not None]
            fence_slots += [bank.input_slots[i] for i in self.mutates if bank.input_slots[i] is not None]
        self.scalars = [None if isinstance(x, torch.Tensor) else x for x in first_inputs]
        self._fence_index = torch.tensor([s.offset for s in fence_slots] or [0], device=device_type)
        process.wait_ready(READY_TIMEOUT_S)
        process.request({"op": "attach", "device": device_type, "buffer": self.exchange.description,
                         "banks": [bank.message(self.scalars) for bank in self.banks], "mutates": self.mutates,
                         "flush_l2": flush_l2},
                        READY_TIMEOUT_S)

    def write_inputs(self, inputs: Sequence[Any], bank: int = 0) -> None:
        """Copy one draw into a bank of the exchange (shapes, dtypes and scalars must match the first draw's)."""
        place = self.banks[bank]
        if len(inputs) != len(place.input_slots):
            raise ValueError(f"the problem drew {len(inputs)} inputs, then {len(place.input_slots)}")
        for index, (value, target, slot) in enumerate(zip(inputs, place.input_views, place.input_slots)):
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
        place.written = list(inputs)
        if self.device_type == "cuda":
            torch.cuda.synchronize()

    def call(self, timeout_s: float, mode: str = "execute", timed: bool = False,
             profile: bool = False, banks: Sequence[int] = (0,)) -> dict[str, Any]:
        """One round trip: `solve` on each of `banks`, in that order."""
        return self.process.request({"op": "call", "mode": mode, "timed": timed, "profile": profile,
                                     "banks": list(banks)}, timeout_s)

    def fence(self) -> None:
        """Read one byte of every output slot of every bank and wait for it (see timing.py)."""
        self.exchange.tensor[self._fence_index].sum().item()

    def read_outputs(self, bank: int = 0) -> list[Any]:
        """Private copies of a bank's returned outputs, then of its mutated inputs (the MetaKernelBench order)."""
        place = self.banks[bank]
        produced: list[Any] = [v.clone() for v in place.output_views]
        for index in self.mutates:
            target = place.input_views[index]
            produced.append(target.clone() if target is not None else self.scalars[index])
        return produced

    def unchanged_inputs_problem(self, bank: int = 0) -> Optional[str]:
        """Which input `solve` changed although the problem does not list it as mutated (None: none)."""
        place = self.banks[bank]
        for index, (target, value) in enumerate(zip(place.input_views, place.written)):
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


def bank_bytes(inputs: Sequence[Any], outputs: Sequence[torch.Tensor]) -> int:
    """Bytes one bank of the exchange takes for this draw's inputs and these outputs."""
    tensors = [x for x in (*inputs, *outputs) if isinstance(x, torch.Tensor)]
    return plan_slots(tensors)[1]


__all__ = ["KernelSession", "bank_bytes", "copy_into"]
