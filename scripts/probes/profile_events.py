"""Dump what torch.profiler recorded for one `solve` call on a GPU, and how `evidence.summarise` classified it.

Use it when a decoration verdict looks wrong on a new GPU, driver or torch: the classification depends on links
(correlation ids, operators' `kernels`, host spans) that CUPTI and torch fill in, and this shows them raw.
Runs the kernel in this process, unsandboxed: only for files you wrote yourself.

    python scripts/probes/profile_events.py mlp_norm/13_down_proj_residual_gemm \
        tests/adversarial/cute_v2_decoration_cublas_gemm.py --json /tmp/events.json
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import torch

from mkb_ray.kernel_runner.evidence import summarise


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _event_row(event: Any) -> dict[str, Any]:
    return {
        "name": event.name[:120], "id": event.id, "linked": getattr(event, "linked_correlation_id", None),
        "device_type": str(getattr(event, "device_type", "")), "thread": getattr(event, "thread", None),
        "start_us": float(event.time_range.start), "end_us": float(event.time_range.end),
        "kernels": [kernel.name[:120] for kernel in (getattr(event, "kernels", None) or [])],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("problem", help="problem id, e.g. mlp_norm/13_down_proj_residual_gemm")
    parser.add_argument("kernel", type=Path, help="kernel file defining solve(...)")
    parser.add_argument("--json", type=Path, help="write every event here as JSON")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: this probe reads the GPU profiler's record", file=sys.stderr)
        return 2
    problem = _load(Path("problems") / f"{args.problem}.py", "probe_problem")
    kernel = _load(args.kernel, "probe_kernel")
    torch.manual_seed(0)
    inputs = [value.cuda() if isinstance(value, torch.Tensor) else value for value in problem.make_inputs()]
    for _ in range(2):  # compile and warm outside the record, as the judge's first call does
        kernel.solve(*inputs)
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as profile:
        kernel.solve(*inputs)
        torch.cuda.synchronize()
    rows = [_event_row(event) for event in profile.events()]
    for row in rows:
        print(f"{row['device_type'][:14]:14} id={row['id']:<6} linked={row['linked']!s:<6} thread={row['thread']!s:<8} "
              f"{row['start_us']:>12.1f} {row['end_us'] - row['start_us']:>9.1f} {row['name'][:70]} "
              f"{'kernels=' + str(row['kernels']) if row['kernels'] else ''}")
    evidence = summarise(profile)
    print("evidence:", json.dumps(evidence.as_json()))
    if args.json:
        args.json.write_text(json.dumps({"events": rows, "evidence": evidence.as_json()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
