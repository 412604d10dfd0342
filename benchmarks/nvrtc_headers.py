"""Does NVRTC's precompiled header make TIRx compiles faster, and is the PTX the same?

Every shipped TIRx GPU solution (`problems/*/solutions/*.tirx.py`) is run on this machine's CPU at production
shapes until its first `tvm.compile` for CUDA returns; the CUDA source TVM generated is kept (the solution is not
run further). Each source is compiled for sm_90a by TVM's own NVRTC path (`tvm.support.nvcc._compile_cuda_nvrtc`,
the one a GPU kernel process takes), alternating in each round: as TVM makes it, and through
`mkb_ray/kernel_runner/nvrtc_headers.py` (libcu++'s type_traits from NVRTC's precompiled header, made by one warm-up
compile first, as a kernel process's warm-up makes it). Printed per solution: the median cubin compile time of each
way and whether the two ways give the same PTX (up to the order of module-scope `.global` declarations, which the
header's place moves). No GPU is needed: NVRTC compiles on the host.

Needs NVRTC and the CUDA headers, which CI does not install; one way on a CPU machine:

    pip install --target /tmp/nvrtc "nvidia-cuda-nvrtc==13.*" "nvidia-cuda-runtime==13.*" "nvidia-cuda-cccl==13.*" \\
        "nvidia-cuda-crt==13.*"
    cp -rn /tmp/nvrtc/nvidia/cu13/include/cccl/cuda /tmp/nvrtc/nvidia/cu13/include/   # where TVM looks for cuda/std
    CUDA_PATH=/tmp/nvrtc/nvidia/cu13 LD_LIBRARY_PATH=/tmp/nvrtc/nvidia/cu13/lib PYTHONPATH=/tmp/nvrtc \\
        python3 benchmarks/nvrtc_headers.py [--problem mlp_norm/01_fused_add_rmsnorm ...] [--rounds 3]
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from mkb_ray.checker.problem_loader import load_problem  # noqa: E402
from mkb_ray.kernel_runner.nvrtc_headers import NvrtcHeaderCache, same_ptx  # noqa: E402
from mkb_ray.problems import Problem, load_problems  # noqa: E402

ARCH = "sm_90a"
VARIANT = "tirx"  # the GPU solution, whose CUDA source a GPU kernel process compiles
WARM_SOURCE = '#include <cuda/std/type_traits>\nextern "C" __global__ void warm(float* x) { x[0] = 1.0f; }\n'


class _SourceTaken(Exception):
    """Raised from the wrapped tvm.compile once the CUDA source is in hand: the solution need not run on."""


def cuda_sources(entry: Problem) -> list[str]:
    """The CUDA source of the first TIRx compile for CUDA the problem's TIRx solution makes at production shapes."""
    import tvm

    problem = load_problem(entry.path, entry.problem_id, "production")
    path = entry.solutions[VARIANT]
    spec = importlib.util.spec_from_file_location(f"solution_{entry.problem_id.replace('/', '_')}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: cannot be imported")
    taken: list[str] = []
    real_compile = tvm.compile

    def taking_compile(mod, target=None, *args, **kwargs):
        executable = real_compile(mod, target, *args, **kwargs)
        taken.extend(m.inspect_source() for m in executable.mod.imports if m.kind == "cuda")
        raise _SourceTaken

    tvm.compile = taking_compile
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.solve(*problem.draw(0))
    except _SourceTaken:
        pass
    except Exception as err:  # noqa: BLE001 - a solution that needs the GPU before compiling is reported, not fatal
        if not taken:
            print(f"{entry.problem_id}: no CUDA source taken ({type(err).__name__}: {str(err)[:120]})", file=sys.stderr)
    finally:
        tvm.compile = real_compile
    return taken


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--problem", nargs="*", help="problem ids (default: every problem with a TIRx solution)")
    parser.add_argument("--rounds", type=int, default=3, help="cubin compiles of each way per source (default 3)")
    args = parser.parse_args(argv)
    from cuda.bindings import nvrtc
    from tvm.support import nvcc

    cache = NvrtcHeaderCache(nvrtc)
    ways = {"tvm": nvcc._compile_cuda_nvrtc, "cached": lambda *a: cache.run(nvcc._compile_cuda_nvrtc, *a)}
    problems = load_problems()
    ids = args.problem or sorted(p.problem_id for p in problems.problems if VARIANT in p.solutions)
    torch.manual_seed(0)
    for way in ways.values():  # NVRTC's first use; the precompiled header made, as a kernel process's warm-up does
        way(WARM_SOURCE, "cubin", ARCH)
    print(f"# NVRTC {'.'.join(map(str, nvrtc.nvrtcVersion()[1:]))}, {ARCH}, median of {args.rounds} cubin compiles "
          f"each way, alternating; PTX compared once")
    print("| problem | as TVM makes it, s | precompiled header, s | saved s | same PTX |")
    print("|---|---|---|---|---|")
    saved, same, rows = [], 0, 0
    for problem_id in ids:
        for source in cuda_sources(problems.get(problem_id)):
            times: dict[str, list[float]] = {name: [] for name in ways}
            for _ in range(args.rounds):
                for name, way in ways.items():
                    started = time.perf_counter()
                    way(source, "cubin", ARCH)
                    times[name].append(time.perf_counter() - started)
            identical = same_ptx(bytes(ways["tvm"](source, "ptx", ARCH)), bytes(ways["cached"](source, "ptx", ARCH)))
            full, cached = statistics.median(times["tvm"]), statistics.median(times["cached"])
            rows += 1
            same += identical
            saved.append(full - cached)
            print(f"| {problem_id} | {full:.3f} | {cached:.3f} | {full - cached:.3f} | "
                  f"{'yes' if identical else '**no**'} |", flush=True)
    if saved:
        print(f"# {rows} sources: saved median {statistics.median(saved):.3f} s (range {min(saved):.3f}-"
              f"{max(saved):.3f}); same PTX {same} of {rows}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
