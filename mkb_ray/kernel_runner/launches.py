"""Interception of DSL compiles and launches: the judge's view of what a kernel actually ran.

Before the submission is imported, `LaunchMonitor.install()` replaces the DSLs' public entry points
(`cutlass.cute.compile`, `cutlass.cute.runtime.from_dlpack`, `tvm.compile`) with wrappers. Every compiled kernel
the submission gets back is a `monitored_kernel`; calling it is a launch, counted per `solve` call. The monitor's
mode decides what a launch does:

- `execute`: run the kernel (the normal path);
- `compile_only`: a GPU kernel on a machine without a GPU; nothing runs, the compile produced PTX and is recorded;
- `probe`: run the kernel and note which tensor arguments it wrote (and whether it only copied an input);
- `knockout`: run the kernel, then poison (NaN) every argument it wrote — as if it had not run — so outputs that
  still pass prove the DSL part was decoration;
- `scramble`: run the kernel, then replace what it wrote by a random permutation of those same values. Outputs
  that still pass depend on the DSL only through something a permutation keeps (a zero or constant term, a NaN
  flag), i.e. not on what the DSL computed.
"""
from __future__ import annotations

import contextlib
import hashlib
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

# Bound when the monitor is imported, before any submission: a kernel that rebinds `time.thread_time` for the
# length of a call (and back) does not change what a launch is charged (guards.py watches the name as well).
_thread_time = time.thread_time

MODES = ("execute", "compile_only", "probe", "knockout", "scramble")


@dataclass
class CompileRecord:
    dsl: str
    target: str
    seconds: float
    ptx_bytes: int = 0
    executes: bool = True
    kernels: list[str] = field(default_factory=list)  # the device kernels it produced, as CUPTI names them


@dataclass
class CallRecord:
    """What one `solve` call launched."""

    launches: int = 0
    stub_launches: int = 0
    written: list[list[int]] = field(default_factory=list)  # per launch: indices of args it wrote (probe)
    copy_only: list[bool] = field(default_factory=list)  # per launch: every written arg equals an input arg
    # probe: (tensor, its values right after the launch) for every written arg that is not a copy of an input
    computed: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)
    launch_us: float = 0.0  # wall time inside executed launches (the DSL's share of a CPU call)
    # The launching thread's CPU time inside executed launches: unlike wall time, not raised by the thread being
    # descheduled on a loaded machine (checker/profiled_twins.py compares it across a profiled call and its twin).
    launch_cpu_us: float = 0.0


def _poison(tensor: torch.Tensor) -> None:
    if tensor.is_floating_point():
        tensor.fill_(float("nan"))
    elif tensor.dtype == torch.bool:
        tensor.copy_(~tensor)
    else:
        tensor.fill_(torch.iinfo(tensor.dtype).max)


_SAME_SIZE_INTS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _permute(tensor: torch.Tensor) -> None:
    # Through an integer view of the same width: fp8 and other exotic dtypes need no indexing kernels of their own.
    bits = tensor.view(_SAME_SIZE_INTS[tensor.element_size()])
    order = torch.randperm(bits.numel(), device=bits.device)
    bits.copy_(bits.reshape(-1)[order].reshape(bits.shape))


def _same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))


class LaunchMonitor:
    """Owns the patched DSL entry points and the per-call launch records."""

    def __init__(self, has_gpu: bool, ptx_cache_dir: Path | None = None) -> None:
        self.has_gpu = has_gpu
        self.mode = "execute"
        self.ptx_cache_dir = ptx_cache_dir
        self.compiles: list[CompileRecord] = []
        # The device kernels the DSL's compiler produced here, by the names CUPTI reports them under: what ties a
        # kernel in the device record to the DSL (kernel_runner/evidence.py).
        self.compiled_kernels: set[str] = set()
        self.compile_error: str | None = None  # the DSL's message when a compile raised
        self.current = CallRecord()
        self._dlpack_sources: dict[int, tuple[Any, torch.Tensor]] = {}
        self.patched: dict[str, Callable[..., Any]] = {}

    # ----- per-call bookkeeping -------------------------------------------------------------------------
    def begin_call(self, mode: str = "execute") -> None:
        assert mode in MODES, mode
        if self.mode == "compile_only":
            mode = "compile_only"
        self.mode = mode
        self.current = CallRecord()

    def end_call(self) -> CallRecord:
        record = self.current
        self._dlpack_sources.clear()
        return record

    def force_compile_only(self) -> None:
        self.mode = "compile_only"

    # ----- the launch path ------------------------------------------------------------------------------
    def _torch_view(self, arg: Any) -> torch.Tensor | None:
        if isinstance(arg, torch.Tensor):
            return arg
        source = self._dlpack_sources.get(id(arg))
        if source is not None and source[0] is arg:
            return source[1]
        return None

    def launch(self, kernel: Callable[..., Any], executes: bool, args: tuple[Any, ...], kwargs: dict) -> Any:
        record = self.current
        record.launches += 1
        if not executes:
            record.stub_launches += 1
            return None
        if self.mode == "execute":
            started, cpu_started = time.perf_counter(), _thread_time()
            result = kernel(*args, **kwargs)
            record.launch_us += (time.perf_counter() - started) * 1e6
            record.launch_cpu_us += (_thread_time() - cpu_started) * 1e6
            return result
        views = [self._torch_view(a) for a in args]
        # The snapshot is taken with the device idle: work the candidate queued on another stream (zeroing its
        # outputs, say) is not ordered before a clone on the current one, which could otherwise read the buffers
        # after this launch already wrote them and see nothing written (H200, 2026-12-05: a side-stream launch
        # left unpoisoned, so knockout failed it for the wrong reason).
        self._sync()
        before = [v.clone() if v is not None else None for v in views]
        result = kernel(*args, **kwargs)
        self._sync()
        written = [i for i, (v, b) in enumerate(zip(views, before)) if v is not None and not _same_values(v, b)]
        if self.mode in ("knockout", "scramble"):
            # What this launch wrote, seen now, not what the probe's launch at the same position wrote: a kernel
            # that picks among DSL kernels by the data launches another kernel, with other arguments, at that
            # position in this call (an honest dispatch was failed as `input_mutated` when the poison landed in an
            # input). Knockout poisons what the launch wrote, as if it had not run; scramble permutes it.
            for position in written:
                view = views[position]
                assert view is not None
                (_permute if self.mode == "scramble" else _poison)(view)
            return result
        record.written.append(written)
        inputs = [b for i, b in enumerate(before) if b is not None and i not in written]
        copies = [w for w in written if any(_same_values(views[w], b) for b in inputs)]
        record.copy_only.append(bool(written) and len(copies) == len(written))
        record.computed.extend((views[w], views[w].clone()) for w in written if w not in copies)
        return result

    def _sync(self) -> None:
        if self.has_gpu:
            torch.cuda.synchronize()

    @contextlib.contextmanager
    def compile_step(self) -> Iterator[None]:
        """Remember the DSL's error message when a compile fails (the submission may swallow the exception)."""
        try:
            yield
        except Exception as err:
            self.compile_error = f"{type(err).__name__}: {err}"
            raise

    # ----- installation ---------------------------------------------------------------------------------
    def install(self, dsl: str) -> None:
        if dsl == "cutedsl":
            self._install_cute()
        elif dsl == "tirx":
            self._install_tvm()
        else:
            raise ValueError(f"unknown DSL '{dsl}' (use 'cutedsl' or 'tirx')")

    def _install_cute(self) -> None:
        import cutlass.cute as cute
        import cutlass.cute.runtime as cute_runtime

        real_compile = cute.compile
        real_from_dlpack = cute_runtime.from_dlpack
        monitor = self

        def monitored_from_dlpack(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            converted = real_from_dlpack(tensor, *args, **kwargs)
            if isinstance(tensor, torch.Tensor):
                monitor._dlpack_sources[id(converted)] = (converted, tensor)
            return converted

        def monitored_compile(fn: Any, *args: Any, options: str | None = None, **kwargs: Any) -> Any:
            executes = monitor.has_gpu
            if not executes:
                options = f"{options or ''} --keep-ptx".strip()
            started = time.perf_counter()
            if options:
                kwargs["options"] = options
            with monitor.compile_step():
                compiled = real_compile(fn, *args, **kwargs)
            seconds = time.perf_counter() - started
            ptx = getattr(getattr(compiled, "artifacts", None), "PTX", None) or ""
            if not executes and ".target sm_90a" not in ptx:
                raise RuntimeError("CuTe DSL compile produced no sm_90a PTX (is CUTE_DSL_ARCH=sm_90a set?)")
            # CuTe DSL names each kernel of the compiled function in `kernel_info` (the PTX's .entry names).
            kernels = sorted(str(name) for name in (getattr(compiled, "kernel_info", None) or {}))
            monitor.compiled_kernels.update(kernels)
            monitor.compiles.append(CompileRecord("cutedsl", "sm_90a", seconds, len(ptx), executes, kernels))
            return monitored_kernel(monitor, compiled, executes)

        cute.compile = monitored_compile
        cute_runtime.from_dlpack = monitored_from_dlpack
        self.patched = {"cutlass.cute.compile": monitored_compile,
                        "cutlass.cute.runtime.from_dlpack": monitored_from_dlpack}

    def _install_tvm(self) -> None:
        import tvm

        real_compile = tvm.compile
        monitor = self

        def monitored_compile(mod: Any, target: Any = None, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            with monitor.compile_step():
                executable = real_compile(mod, target, *args, **kwargs)
            kind = _target_kind(target)
            with monitor.compile_step():
                _check_host_symbols(executable)
            executes = kind == "llvm" or (kind == "cuda" and monitor.has_gpu)
            kernels = sorted(cuda_kernel_names(executable)) if kind == "cuda" else []
            monitor.compiled_kernels.update(kernels)
            ptx_bytes = 0
            if kind == "cuda" and not monitor.has_gpu:
                with monitor.compile_step():
                    ptx_bytes = len(monitor._tvm_cuda_to_ptx(executable, target))
            seconds = time.perf_counter() - started
            monitor.compiles.append(CompileRecord("tirx", _target_label(target), seconds, ptx_bytes, executes,
                                                  kernels))
            return MonitoredExecutable(monitor, executable, executes)

        tvm.compile = monitored_compile
        self.patched = {"tvm.compile": monitored_compile}

    def _tvm_cuda_to_ptx(self, executable: Any, target: Any) -> bytes:
        """Compile the CUDA source TVM generated to PTX with nvcc (cached by source hash)."""
        import tvm
        from tvm.support import nvcc

        sources = [m.inspect_source() for m in executable.mod.imports if m.kind == "cuda"]
        if not sources:
            raise RuntimeError("TIRx compile for CUDA produced no CUDA module")
        source = "\n".join(sources)
        arch = _target_arch(target)
        key = hashlib.sha256(f"{arch}\n{source}".encode()).hexdigest()
        cached = self.ptx_cache_dir / f"{key}.ptx" if self.ptx_cache_dir else None
        if cached is not None and cached.exists():
            return cached.read_bytes()
        with tvm.target.Target(target) if not isinstance(target, tvm.target.Target) else target:
            ptx = bytes(nvcc.compile_cuda(source, target_format="ptx", arch=arch, compiler="nvcc"))
        if cached is not None:
            try:
                cached.parent.mkdir(parents=True, exist_ok=True)
                cached.write_bytes(ptx)
            except OSError:  # the cache is an optimisation; a read-only one just costs the next compile
                pass
        return ptx


# What the host (LLVM) code of a TIRx kernel may call: LLVM intrinsics, the few TVM runtime entry points compiled
# kernels use (raising an error, workspace and parallel-for), compiler-rt float conversions and libm — named one
# by one. Anything else (`T.call_extern("int32", "system", ...)`, the Python C API, a TVMFFI function lookup that
# ends in a Python callback) runs code that is neither the DSL kernel nor visible to the static rules.
_HOST_SYMBOL_PREFIXES = ("llvm.",)
_TVM_RUNTIME_SYMBOLS = {"TVMFFIErrorSetRaisedFromCStrParts", "TVMBackendAllocWorkspace", "TVMBackendFreeWorkspace",
                        "TVMBackendParallelLaunch", "TVMBackendParallelBarrier"}
_HOST_SYMBOLS = {
    *_TVM_RUNTIME_SYMBOLS,
    "__extendhfsf2", "__truncsfhf2", "__truncdfhf2", "__gnu_h2f_ieee", "__gnu_f2h_ieee", "__truncsfbf2",
    "__truncdfbf2", "__extendbfsf2", "memcpy", "memmove", "memset",
    *(name + suffix for suffix in ("", "f") for name in (
        "exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "pow", "hypot", "sin",
        "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf",
        "erfc", "tgamma", "lgamma", "fabs", "floor", "ceil", "trunc", "round", "rint", "nearbyint", "fmod",
        "remainder", "fma", "fmin", "fmax", "copysign", "nextafter", "ldexp", "frexp")),
}


class ForbiddenHostCall(RuntimeError):
    """The compiled host code calls a symbol outside the allow-list."""


def _check_host_symbols(executable: Any) -> None:
    source = executable.mod.inspect_source("ll")
    declared = {line.split("@", 1)[1].split("(", 1)[0].strip('"')
                for line in source.splitlines() if line.startswith("declare ") and "@" in line}
    foreign = sorted(name for name in declared
                     if name not in _HOST_SYMBOLS and not name.startswith(_HOST_SYMBOL_PREFIXES))
    if foreign:
        raise ForbiddenHostCall(f"the kernel's host code calls external symbols {foreign}; only LLVM intrinsics, "
                                "libm and the TVM runtime may be called (no call_extern into the process)")


def cuda_kernel_names(executable: Any) -> set[str]:
    """The `__global__` functions of the CUDA source TVM generated for `executable` (extern "C": CUPTI reports
    them by these names)."""
    names: set[str] = set()
    for module in executable.mod.imports:
        if module.kind == "cuda":
            names.update(_GLOBAL_FUNCTION.findall(module.inspect_source()))
    return names


_GLOBAL_FUNCTION = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(")


def _target_kind(target: Any) -> str:
    if target is None:
        return "llvm"
    if isinstance(target, str):
        return target.split()[0]
    if isinstance(target, dict):
        return str(target.get("kind", ""))
    kind = getattr(target, "kind", None)
    return str(getattr(kind, "name", kind))


def _target_arch(target: Any) -> str:
    if isinstance(target, dict):
        return str(target.get("arch", "sm_90a"))
    arch = getattr(target, "arch", None)
    return str(arch) if arch else "sm_90a"


def _target_label(target: Any) -> str:
    kind = _target_kind(target)
    return _target_arch(target) if kind == "cuda" else kind


def monitored_kernel(monitor: LaunchMonitor, kernel: Callable[..., Any], executes: bool) -> Callable[..., Any]:
    """A compiled DSL kernel whose calls are launches the judge counts (and may suppress). A closure rather than an
    object with attributes: through it the submission must reach neither the monitor (whose mode would tell it
    which call is the knockout) nor the unmonitored kernel."""

    def launch(*args: Any, **kwargs: Any) -> Any:
        return monitor.launch(kernel, executes, args, kwargs)

    return launch


class MonitoredExecutable:
    """What `tvm.compile` returns to a submission: functions are fetched with `exe["name"]`. It holds only a
    lookup closure, for the same reason as `monitored_kernel`."""

    def __init__(self, monitor: LaunchMonitor, executable: Any, executes: bool) -> None:
        self._function = lambda name: monitored_kernel(monitor, executable[name], executes)

    def __getitem__(self, name: str) -> Callable[..., Any]:
        return self._function(name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self["main"](*args, **kwargs)
