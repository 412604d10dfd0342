"""The CUDA IPC handle the checker hands the kernel process (mkb_ray/kernel_runner/exchange.py) survives the trip as
bytes whatever the cuda-bindings release: 13.4 and later no longer expose the handle's bytes as `.reserved` (the GPU
host's judge failed every GPU judgement with AttributeError under 13.4.4, 2026-12-06), so they are read and written
through the struct's address. No GPU needed: the struct is host memory."""
from __future__ import annotations

import pytest

from mkb_ray.kernel_runner.exchange import IPC_HANDLE_BYTES, _ipc_handle, _ipc_handle_bytes

runtime = pytest.importorskip("cuda.bindings.runtime", reason="cuda-bindings is not installed")


def test_an_ipc_handle_round_trips_through_its_bytes():
    data = bytes(range(7, 7 + IPC_HANDLE_BYTES))
    handle = _ipc_handle(runtime, data)
    assert isinstance(handle, runtime.cudaIpcMemHandle_t)
    assert _ipc_handle_bytes(handle) == data
    # A fresh handle is all zeros; ours is a copy, not a view of `data`.
    assert _ipc_handle_bytes(runtime.cudaIpcMemHandle_t()) == bytes(IPC_HANDLE_BYTES)


def test_a_handle_of_the_wrong_size_is_refused():
    with pytest.raises(ValueError, match="64 bytes"):
        _ipc_handle(runtime, bytes(63))
