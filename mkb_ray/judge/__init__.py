"""The parent side of judging: where a kernel is judged.

    kernel.py    judge_kernel: a kernel file in, a typed Verdict out (the one entry point)
    process.py   checker processes and their warm pool: hard timeout, memory limit over the tree, the result pipe
    validate.py  `mkb problems validate`: every shipped solution and each problem's validity screens
    device.py    is there a GPU here; the PTX compile cache

The judging options (`JudgeOptions`) and the request sent to the worker are defined once, in
`mkb_ray.checker.request` (standard library only, so the subprocess can read them too), and re-exported here.
What runs inside the subprocess is `mkb_ray.checker`.
"""
from __future__ import annotations

from .._lazy import lazy_exports

__all__ = ["CheckerPool", "GPU_SPARES", "JudgeLimits", "JudgeOptions", "JudgeRequest", "default_preset", "detect_gpu",
           "JudgingRefused", "gpu_arch", "judge_kernel", "ptx_cache_dir", "run_worker", "worker_env"]

# Lazy, so that `mkb --help` (which reads the option defaults) does not import pydantic and the problem registry.
_EXPORTS = {
    "JudgeOptions": "mkb_ray.checker.request", "JudgeRequest": "mkb_ray.checker.request",
    "default_preset": "mkb_ray.checker.request", "detect_gpu": "mkb_ray.judge.device",
    "ptx_cache_dir": "mkb_ray.judge.device", "judge_kernel": "mkb_ray.judge.kernel",
    "JudgingRefused": "mkb_ray.judge.kernel", "gpu_arch": "mkb_ray.judge.device",
    "JudgeLimits": "mkb_ray.judge.process", "CheckerPool": "mkb_ray.judge.process",
    "GPU_SPARES": "mkb_ray.judge.process",
    "run_worker": "mkb_ray.judge.process",
    "worker_env": "mkb_ray.judge.process",
}

__getattr__ = lazy_exports(__name__, _EXPORTS)
