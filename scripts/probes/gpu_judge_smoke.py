"""One GPU judgement per DSL, printed in full when it fails: the first thing to run on a fresh GPU host (is the
kernel sandbox there, does CUDA IPC cross it, does the profiler see the DSL's kernels)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from mkb_ray.judge import JudgeOptions, judge_kernel
from mkb_ray.problems import load_problems

PROBLEM = "mlp_norm/01_fused_add_rmsnorm"


def main() -> int:
    problems = load_problems()
    problem = problems.get(PROBLEM)
    failed = 0
    for dsl, suffix in (("cutedsl", "cutedsl"), ("tirx", "tirx")):
        started = time.perf_counter()
        verdict = judge_kernel(problem, Path(f"problems/mlp_norm/solutions/01_fused_add_rmsnorm.{suffix}.py"), dsl,
                               "cuda", options=JudgeOptions(compile_baseline=False))
        print(f"{dsl}: {verdict.tier} {verdict.rejected_by} in {time.perf_counter() - started:.1f} s: {verdict.reason}")
        print(f"  dsl_share={verdict.dsl_share} evidence={verdict.work_evidence} "
              f"overhead={verdict.harness_overhead_ms}")
        print(f"  phases={verdict.phases_s}")
        if not verdict.passed:
            failed += 1
            print(verdict.log_tail[-3000:])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
