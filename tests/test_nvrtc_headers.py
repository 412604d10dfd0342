"""The kernel process's NVRTC precompiled header (mkb_ray/kernel_runner/nvrtc_headers.py).

The routing is checked against a recording stand-in for NVRTC's two entry points (CI installs no NVRTC); the real
compiler, where this machine has it, compiles one source both ways and the PTX must match.
benchmarks/nvrtc_headers.py does the latter for every shipped TIRx solution."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from mkb_ray.kernel_runner.nvrtc_headers import LEADING_HEADER, PCH_OPTIONS, NvrtcHeaderCache, same_ptx


def _recording_nvrtc(fail_first_compile: bool = False) -> SimpleNamespace:
    calls: list[tuple[str, object]] = []
    failures = [fail_first_compile]

    def create(src, name, num_headers, headers, include_names):
        calls.append(("create", src))
        return ("program", src)

    def compile_program(program, count, options):
        assert count == len(options), "the option count NVRTC gets must match the list"
        calls.append(("compile", list(options)))
        if failures.pop() if failures else False:
            raise RuntimeError("NVRTC compile failed")
        return ("ok",)

    return SimpleNamespace(nvrtcCreateProgram=create, nvrtcCompileProgram=compile_program, calls=calls)


def _compile_like_tvm(nvrtc: SimpleNamespace, source: bytes) -> str:
    program = nvrtc.nvrtcCreateProgram(source, b"tvm_kernels.cu", 0, None, None)
    options = [b"--gpu-architecture=sm_90a", b"-default-device"]
    nvrtc.nvrtcCompileProgram(program, len(options), options)
    return "cubin"


def test_inside_run_the_source_leads_with_the_header_and_the_options_ask_for_the_precompiled_header():
    nvrtc = _recording_nvrtc()
    cache = NvrtcHeaderCache(nvrtc)
    assert cache.run(_compile_like_tvm, nvrtc, b"__global__ void k() {}") == "cubin"
    (_, source), (_, options) = nvrtc.calls
    assert source == LEADING_HEADER + b"__global__ void k() {}"
    assert options[-len(PCH_OPTIONS):] == list(PCH_OPTIONS) and options[0] == b"--gpu-architecture=sm_90a"


def test_outside_run_nvrtc_is_called_as_it_was():
    nvrtc = _recording_nvrtc()
    NvrtcHeaderCache(nvrtc)
    _compile_like_tvm(nvrtc, b"__global__ void k() {}")  # a candidate calling NVRTC itself, say
    assert nvrtc.calls == [("create", b"__global__ void k() {}"),
                           ("compile", [b"--gpu-architecture=sm_90a", b"-default-device"])]


def test_a_compile_that_fails_with_the_header_is_retried_as_tvm_makes_it():
    nvrtc = _recording_nvrtc(fail_first_compile=True)
    cache = NvrtcHeaderCache(nvrtc)
    assert cache.run(_compile_like_tvm, nvrtc, b"src") == "cubin"
    sources = [value for kind, value in nvrtc.calls if kind == "create"]
    assert sources == [LEADING_HEADER + b"src", b"src"]
    assert not cache.active


def test_a_source_that_fails_both_ways_raises_the_compilers_error():
    nvrtc = _recording_nvrtc()
    cache = NvrtcHeaderCache(nvrtc)

    def broken(*_):
        raise RuntimeError("tvm_kernels.cu(3): error: identifier undefined")

    with pytest.raises(RuntimeError, match="identifier undefined"):
        cache.run(broken)
    assert not cache.active


def test_with_the_real_nvrtc_the_ptx_is_the_same_both_ways():
    try:
        from cuda.bindings import nvrtc
        nvrtc.nvrtcVersion()
        from tvm.support import nvcc
        nvcc.find_cuda_path()
    except Exception as err:  # noqa: BLE001 - any missing piece means this machine cannot compile CUDA
        pytest.skip(f"no NVRTC with CUDA headers on this machine ({type(err).__name__}); "
                    "benchmarks/nvrtc_headers.py --help says how to get them")
    source = ('#include <cuda/std/type_traits>\n'
              'extern "C" __global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }\n')
    cache = NvrtcHeaderCache(nvrtc)
    plain = bytes(nvcc._compile_cuda_nvrtc(source, "ptx", "sm_90a"))
    cached = bytes(cache.run(nvcc._compile_cuda_nvrtc, source, "ptx", "sm_90a"))
    assert same_ptx(plain, cached)
