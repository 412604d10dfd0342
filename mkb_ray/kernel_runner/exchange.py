"""The memory both judging processes see: one buffer holding, per bank, one draw's inputs and its output slots.

The checker allocates it (a file on tmpfs for the CPU target, a dedicated `cudaMalloc` shared through CUDA IPC
on the GPU), writes each draw's inputs into it and reads outputs back from it; the kernel process maps the same
memory and hands views of it to `solve`. In-place problems therefore mutate the very buffers the checker reads.

A dedicated allocation, never a block of a caching allocator: an IPC handle opens its whole allocation, and a
shared block could hold the checker's other tensors (expected outputs, the anchor).

Messages that describe the buffer travel only from the checker to the kernel process; the checker never parses a
layout (or anything else) the kernel process wrote.
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import torch

ALIGN = 256
# Above the caching allocator's split threshold a CUDA allocation is its own segment; we bypass it anyway, but
# keep buffers at least this large so sizes never need rounding per draw.
MIN_BYTES = 1 << 20

DTYPES = {name: getattr(torch, name) for name in (
    "float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int64", "int32", "int16", "int8",
    "uint8", "bool")}


def dtype_name(dtype: torch.dtype) -> str:
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise ValueError(f"dtype {dtype} cannot cross between the judging processes")
    return name


@dataclass(frozen=True)
class TensorSlot:
    """Where one tensor lives in the exchange buffer (contiguous, row-major)."""

    dtype: str
    shape: tuple[int, ...]
    offset: int

    @property
    def nbytes(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count * DTYPES[self.dtype].itemsize

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TensorSlot":
        return cls(str(data["dtype"]), tuple(int(s) for s in data["shape"]), int(data["offset"]))


def plan_slots(tensors: Sequence[Optional[torch.Tensor]], start: int = 0) -> tuple[list[Optional[TensorSlot]], int]:
    """Slots for `tensors` (None entries get none) packed from `start`; returns them and the end offset."""
    slots: list[Optional[TensorSlot]] = []
    offset = start
    for tensor in tensors:
        if tensor is None:
            slots.append(None)
            continue
        offset = (offset + ALIGN - 1) // ALIGN * ALIGN
        slot = TensorSlot(dtype_name(tensor.dtype), tuple(tensor.shape), offset)
        slots.append(slot)
        offset += max(slot.nbytes, 1)
    return slots, offset


def view(buffer: torch.Tensor, slot: TensorSlot) -> torch.Tensor:
    """The typed tensor `slot` describes, on the uint8 `buffer`'s memory. A tensor of its own dtype set on the
    shared storage, not a dtype-changing view of the buffer: to `solve` (and to torch.compile, which refuses to
    mutate inputs that are views with another dtype) it is an ordinary contiguous tensor."""
    dtype = DTYPES[slot.dtype]
    strides, step = [], 1
    for size in reversed(slot.shape):
        strides.insert(0, step)
        step *= max(size, 1)
    tensor = torch.empty(0, dtype=dtype, device=buffer.device)
    return tensor.set_(buffer.untyped_storage(), slot.offset // dtype.itemsize, slot.shape, tuple(strides))


class _CudaArray:
    """A raw device pointer in the CUDA array interface, so torch can wrap it without copying."""

    def __init__(self, pointer: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (pointer, False),
                                         "version": 3, "strides": None}


def _cudart() -> Any:
    from cuda.bindings import runtime

    return runtime


# CUDA_IPC_HANDLE_SIZE: the opaque handle's bytes. Read and written through the struct's address, which every
# cuda-bindings release offers (getPtr); 13.3 also exposed them as `.reserved`, 13.4 (vLLM 0.26's pin) does not.
IPC_HANDLE_BYTES = 64


def _ipc_handle_bytes(handle: Any) -> bytes:
    return ctypes.string_at(int(handle.getPtr()), IPC_HANDLE_BYTES)


def _ipc_handle(runtime: Any, data: bytes) -> Any:
    if len(data) != IPC_HANDLE_BYTES:
        raise ValueError(f"a CUDA IPC handle has {IPC_HANDLE_BYTES} bytes, got {len(data)}")
    handle = runtime.cudaIpcMemHandle_t()
    ctypes.memmove(int(handle.getPtr()), data, IPC_HANDLE_BYTES)
    return handle


def _checked(result: Any, what: str) -> Any:
    error, *values = result if isinstance(result, tuple) else (result,)
    if int(error) != 0:
        raise RuntimeError(f"{what} failed: {error}")
    return values[0] if len(values) == 1 else values


class ExchangeBuffer:
    """The checker's side: allocate, describe (for the kernel process), free."""

    def __init__(self, nbytes: int, device: str, directory: Path) -> None:
        self.nbytes = max(nbytes, MIN_BYTES)
        self.device = device
        self._pointer: Optional[int] = None
        if device == "cuda":
            runtime = _cudart()
            torch.cuda.init()
            self._pointer = int(_checked(runtime.cudaMalloc(self.nbytes), "cudaMalloc"))
            handle = _checked(runtime.cudaIpcGetMemHandle(self._pointer), "cudaIpcGetMemHandle")
            self.description = {"kind": "cuda_ipc", "handle": _ipc_handle_bytes(handle).hex(),
                                "device": torch.cuda.current_device(), "nbytes": self.nbytes}
            self.tensor = torch.as_tensor(_CudaArray(self._pointer, self.nbytes), device="cuda")
        else:
            path = directory / "exchange.bin"
            with open(path, "wb") as file:
                file.truncate(self.nbytes)
            os.chmod(path, 0o666)  # the kernel process may run under another uid
            self.description = {"kind": "file", "name": path.name, "nbytes": self.nbytes}
            self.tensor = torch.from_file(str(path), shared=True, size=self.nbytes, dtype=torch.uint8)

    def close(self) -> None:
        if self._pointer is not None:
            torch.cuda.synchronize()
            _checked(_cudart().cudaFree(self._pointer), "cudaFree")
            self._pointer = None


def open_exchange(description: dict[str, Any], directory: Path) -> torch.Tensor:
    """The kernel process's side: the checker's buffer as a uint8 tensor on its device."""
    nbytes = int(description["nbytes"])
    if description["kind"] == "cuda_ipc":
        runtime = _cudart()
        torch.cuda.set_device(int(description["device"]))
        torch.cuda.init()
        handle = _ipc_handle(runtime, bytes.fromhex(description["handle"]))
        pointer = _checked(runtime.cudaIpcOpenMemHandle(handle, runtime.cudaIpcMemLazyEnablePeerAccess),
                           "cudaIpcOpenMemHandle")
        return torch.as_tensor(_CudaArray(int(pointer), nbytes), device="cuda")
    path = directory / str(description["name"])
    return torch.from_file(str(path), shared=True, size=nbytes, dtype=torch.uint8)


__all__ = ["ExchangeBuffer", "TensorSlot", "open_exchange", "plan_slots", "view", "dtype_name", "DTYPES"]
