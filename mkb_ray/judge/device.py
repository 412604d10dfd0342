"""Where kernels can be judged on this machine: is there a GPU, and where compiled PTX is cached."""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Optional


def detect_gpu() -> bool:
    """Whether this machine has a usable NVIDIA GPU. No NVIDIA device node: no (decided without importing torch,
    which costs ~1 s); otherwise torch decides, as the judging worker will."""
    if not (os.path.exists("/dev/nvidia0") or os.path.exists("/proc/driver/nvidia/gpus")):
        return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - no torch/CUDA means no GPU here
        return False


@functools.lru_cache(maxsize=1)
def gpu_arch() -> Optional[str]:
    """This machine's GPU as an arch name (compute capability 9.0 -> 'sm_90a'); None without a GPU."""
    if not detect_gpu():
        return None
    import torch

    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}a"


def ptx_cache_dir() -> Path:
    """The TIRx→PTX compile cache, keyed by source hash (`MKB_CACHE_DIR` moves it; default ~/.cache/mkb-ray)."""
    base = Path(os.environ.get("MKB_CACHE_DIR", Path.home() / ".cache" / "mkb-ray"))
    return base / "ptx"
