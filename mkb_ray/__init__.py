"""mkb-ray: MetaKernelBench on Ray — judge GPU kernels, run agents, measure whether their skills transfer.

Kept import-light on purpose: the judging worker (`mkb_ray.checker`) runs on bare GPU hosts with only torch,
numpy and the DSLs installed, and it imports this package first. Public names load lazily.
"""
from __future__ import annotations

from ._lazy import lazy_exports

__all__ = ["Verdict", "judge_kernel", "load_problems", "Problem", "JudgeLimits", "JudgeOptions"]

_EXPORTS = {
    "Verdict": "mkb_ray.records",
    "judge_kernel": "mkb_ray.judge",
    "JudgeOptions": "mkb_ray.judge",
    "JudgeLimits": "mkb_ray.judge",
    "load_problems": "mkb_ray.problems",
    "Problem": "mkb_ray.problems",
}


__getattr__ = lazy_exports(__name__, _EXPORTS)
