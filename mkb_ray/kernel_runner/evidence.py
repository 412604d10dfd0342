"""What ran during one profiled `solve` call besides the DSL: PyTorch compute (and host code) vs glue.

- GPU: the device's own record (torch.profiler's CUPTI kernel activity). A kernel is PyTorch's when the profiler
  links it to the aten operator that launched it (cuBLAS's GEMMs under `aten::mm` included, whatever their name)
  or when it is named after ATen (`at::native::...`); every other kernel the call launched is the DSL's, whatever
  the candidate named it (a DSL kernel called `copy_blocks` or `prefill` is the DSL's work, not glue). Of those,
  the ones whose name is not among the kernels the DSL's compiler produced for this process (the launch
  monitor reads them from each compile's output) are also counted apart, `unnamed_us`: foreign CUDA compiled at
  run time (NVRTC, torch's jiterator) lands there, and the checker counts it as work outside the DSL
  (checker/work_share.py). Glue:
  PyTorch's copies (casts), fills and views, and the runtime's device-side memcpy/memset. Host round trips
  (memcpy device↔host) are not glue: they are how host code would do the work.
- CPU target: aten operator events (their self time; glue ops excluded) and numpy calls (the profiler's Python
  tracer) are the non-DSL compute; the launch monitor's time inside the DSL's launches is the DSL's.

On the GPU the record also holds the draw clock's launch lead (`draw_clock.py`): the first device event of the call,
a spin kernel the harness queued before `start`. It is nobody's work and is left out; any other device activity
that began before it ended is work done before the call's clock started (`early_us`, with the names), which the
checker rejects.

Every call also reports its wall-time split (inside launches vs the rest), kept as evidence: at smoke shapes the
fixed Python cost of an honest call is as large as its kernel, so that split is not a rule.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Collection

GLUE_OPS = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "fill_", "zero_", "copy_", "to", "_to_copy", "clone", "contiguous", "detach", "alias", "lift_fresh",
    "view", "view_as", "reshape", "_reshape_alias", "_unsafe_view", "as_strided", "expand", "expand_as",
    "permute", "transpose", "t", "unsqueeze", "squeeze", "flatten", "unflatten", "select", "slice", "narrow",
    "split", "split_with_sizes", "chunk", "unbind", "resize_", "item", "_local_scalar_dense", "set_", "stride",
    "size", "numel", "is_nonzero", "new_empty", "new_zeros", "new_full", "movedim", "dim", "type_as",
    "view_as_real", "view_as_complex", "_has_compatible_shallow_copy_type", "record_stream", "arange",
}
GLUE_KERNEL_WORDS = ("copy", "fill")  # in a PyTorch kernel's name, lower case (CatArrayBatchedCopy, FillFunctor)
RUNTIME_GLUE_PREFIXES = ("memcpy dtod", "memset")  # CUPTI's names for the runtime's own device-side copies
HOST_TRANSFER_WORDS = ("memcpy htod", "memcpy dtoh", "memcpy htoh")
LEAD_KERNEL_WORD = "spin_kernel"  # torch.cuda's sleep kernel, at::cuda::(anonymous namespace)::spin_kernel(long)


@dataclass
class WorkEvidence:
    """One call: how its work split between the DSL and everything else (PyTorch compute, host code)."""

    source: str  # 'cupti_kernels' (GPU) | 'launch_wall_time' (CPU target)
    dsl_us: float = 0.0
    torch_compute_us: float = 0.0
    torch_glue_us: float = 0.0
    compute_ops: dict[str, int] = field(default_factory=dict)  # PyTorch compute op/kernel name -> count
    # CPU target: tensor elements the outermost compute operators took as inputs (record_shapes). At smoke shapes
    # an operator's profiled time is mostly fixed cost (a one-element comparison read 17 µs, the whole of a SwiGLU
    # reference 26 µs), its inputs' size is not.
    torch_compute_elements: int = 0
    # GPU: DSL-counted time in kernels the DSL's compiler never produced in this process (see the module docstring).
    unnamed_us: float = 0.0
    unnamed_kernels: dict[str, int] = field(default_factory=dict)  # their names -> count
    # GPU, evidence only: kernels counted as PyTorch's by their name alone (named after ATen) that no aten operator,
    # glue operators included, launched. A kernel's name is chosen by whoever compiled it (NVRTC compiles one in
    # `namespace at::native` as readily), so this is what a rule would count once honest solutions are shown to
    # record none on the GPU's torch (problems/CONTRACT.md, "A yardstick the kernel cannot inflate").
    unlinked_aten_us: float = 0.0
    unlinked_aten_kernels: dict[str, int] = field(default_factory=dict)
    # GPU: device activity that began before the launch lead ended, i.e. before the call's `start` (draw_clock.py).
    early_us: float = 0.0
    early_events: dict[str, int] = field(default_factory=dict)  # their names -> count
    lead_seen: bool = False  # whether the record held the launch lead (without it, early work cannot be judged)

    @property
    def dsl_share(self) -> float:
        total = self.dsl_us + self.torch_compute_us
        return self.dsl_us / total if total > 0 else 0.0

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "dsl_share": self.dsl_share}


def summarise(profile: Any, compiled_kernels: Collection[str] = ()) -> WorkEvidence:
    """Classify the device events of a finished `torch.profiler.profile` (CPU and CUDA activities).
    `compiled_kernels`: the names of the kernels the DSL's compiler produced in this process (none known: no kernel
    is counted as unnamed)."""
    events = list(profile.events())
    on_device = [event for event in events if _on_device(event)]
    # The operator each device event was launched under. The profiler links a kernel to the innermost frontend
    # event (an aten operator, when PyTorch launched it) by correlation id; frontend events are the host events
    # with no link of their own, as in torch's own association (runtime calls such as cudaLaunchKernel have one;
    # a first version keyed every host event by id and, on the H200, counted an eager cuBLAS GEMM as the DSL's).
    # torch's association itself (each operator's `kernels`, what key_averages reports) is the second source.
    # On torch 2.11 (H200, 2026-12-02) device events carry no link at all and operator ids overlap runtime-call
    # ids, so there the second and third sources decide (scripts/probes/profile_events.py shows the raw record).
    frontend = [event for event in events
                if not _on_device(event) and not getattr(event, "linked_correlation_id", 0)]
    ops = {event.id: event.name for event in frontend}
    named_under: dict[str, str] = {}
    for event in frontend:
        if event.name.startswith("aten::"):
            for kernel in getattr(event, "kernels", None) or []:
                named_under.setdefault(kernel.name, event.name)
    # Third, independent of those links: the host API call that launched the kernel (CUPTI gives both the same
    # correlation id) and the innermost aten operator whose host time span holds that call on the same thread.
    api_calls: dict[int, list[Any]] = {}
    for event in events:
        if not _on_device(event) and event.name.startswith("cu"):  # cudaLaunchKernel, cuLaunchKernelEx, ...
            api_calls.setdefault(event.id, []).append(event)
    # Compute operators only: the search costs (unlinked kernels) x (operators), which an honest loop of DSL
    # launches and glue ops must not pay; an unlinked kernel inside a glue operator (a copy) then counts as the DSL's.
    aten_ops = [event for event in frontend if event.name.startswith("aten::") and not _glue_op(event.name)]
    # Searched only for kernels named after ATen that nothing linked (evidence): PyTorch's own casts and fills.
    glue_ops = [event for event in frontend if event.name.startswith("aten::") and _glue_op(event.name)]
    evidence = WorkEvidence("cupti_kernels")
    on_device = _without_lead(on_device, evidence)
    for event in on_device:
        name, duration = event.name, float(event.time_range.elapsed_us())
        linked = ops.get(getattr(event, "linked_correlation_id", 0) or -1, "")
        launches = api_calls.get(event.id, [])
        if not linked.startswith("aten::"):
            linked = named_under.get(name) or _enclosing_op(launches, aten_ops)
        kind = kernel_kind(name, linked)
        if not linked and named_after_aten(name) and not _enclosing_op(launches, glue_ops):
            evidence.unlinked_aten_us += duration
            evidence.unlinked_aten_kernels[name[:80]] = evidence.unlinked_aten_kernels.get(name[:80], 0) + 1
        if kind == "glue":
            evidence.torch_glue_us += duration
        elif kind == "torch":
            evidence.torch_compute_us += duration
            evidence.compute_ops[name[:80]] = evidence.compute_ops.get(name[:80], 0) + 1
        else:
            evidence.dsl_us += duration
            if compiled_kernels and name not in compiled_kernels:
                evidence.unnamed_us += duration
                evidence.unnamed_kernels[name[:80]] = evidence.unnamed_kernels.get(name[:80], 0) + 1
    return evidence


def _without_lead(on_device: list[Any], evidence: WorkEvidence) -> list[Any]:
    """The call's device events without the launch lead: the first event of the record by start time, the harness's
    spin (nothing of the candidate can start before it: `solve` is called after it is queued, on an idle device).
    Every other event that started before the lead ended is early work, noted in `evidence`."""
    if not on_device:
        return on_device
    lead = min(on_device, key=lambda event: event.time_range.start)
    if LEAD_KERNEL_WORD not in lead.name:
        return on_device
    evidence.lead_seen = True
    rest = [event for event in on_device if event is not lead]
    for event in rest:
        if event.time_range.start < lead.time_range.end:
            evidence.early_us += float(event.time_range.elapsed_us())
            evidence.early_events[event.name[:80]] = evidence.early_events.get(event.name[:80], 0) + 1
    return rest


def _enclosing_op(calls: list[Any], ops: list[Any]) -> str:
    """The innermost of `ops` whose host time span holds one of `calls` on its thread ('' when none does)."""
    best = None
    for call in calls:
        for op in ops:
            if (op.thread == call.thread and op.time_range.start <= call.time_range.start
                    and call.time_range.end <= op.time_range.end
                    and (best is None or op.time_range.start >= best.time_range.start)):
                best = op
    return best.name if best is not None else ""


def _glue_op(name: str) -> bool:
    """Whether an `aten::...` operator name is one of PyTorch's glue operators (allocation, views, copies)."""
    return name.split("::", 1)[1] in GLUE_OPS


def _on_device(event: Any) -> bool:
    return "CUDA" in str(getattr(event, "device_type", ""))


def kernel_kind(name: str, launched_under: str = "") -> str:
    """'torch' (PyTorch or host work), 'glue' or 'dsl' for one device event, from its name and the frontend event
    (operator) the profiler linked it to. Only PyTorch's and the runtime's events can be glue: what a DSL kernel
    is named is the candidate's choice."""
    lowered = name.lower()
    if lowered.startswith(HOST_TRANSFER_WORDS):
        return "torch"
    if launched_under.startswith("aten::"):
        return "glue" if _glue_op(launched_under) else "torch"
    if named_after_aten(name):
        return "glue" if any(word in lowered for word in GLUE_KERNEL_WORDS) else "torch"
    if lowered.startswith(RUNTIME_GLUE_PREFIXES):
        return "glue"
    return "dsl"


def named_after_aten(name: str) -> bool:
    """Whether a device event's name says PyTorch's ATen compiled it (what the name says, not who did)."""
    return "at::" in name or "at_cuda" in name


def cpu_profiler() -> Any:
    """The CPU target's profiler, as both judging processes run it: aten operators with their input shapes
    (`torch_compute_elements`) and the Python tracer (numpy calls). A candidate's calls and the reference's yardstick
    are comparable only when profiled alike."""
    import torch

    return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True,
                                  record_shapes=True)


def summarise_cpu(profile: Any, dsl_launch_us: float) -> WorkEvidence:
    """Classify the aten operators and numpy calls of a finished `cpu_profiler()`."""
    evidence = WorkEvidence("aten_ops", dsl_us=dsl_launch_us)
    for event in profile.events():
        name, self_us = event.name, float(event.self_cpu_time_total)
        if name.startswith("aten::"):
            if _glue_op(name):
                evidence.torch_glue_us += self_us
                continue
            if not _inside_aten_op(event):  # an operator's own sub-operators read the same data again
                evidence.torch_compute_elements += _input_elements(event)
        elif not ("numpy" in name and getattr(event, "is_python_function", False)):
            continue
        evidence.torch_compute_us += self_us
        evidence.compute_ops[name[:60]] = evidence.compute_ops.get(name[:60], 0) + 1
    return evidence


def _inside_aten_op(event: Any) -> bool:
    parent = getattr(event, "cpu_parent", None)
    while parent is not None:
        if str(parent.name).startswith("aten::"):
            return True
        parent = getattr(parent, "cpu_parent", None)
    return False


def _input_elements(event: Any) -> int:
    """Elements of the operator's tensor inputs (scalars and 0-d tensors count one)."""
    total = 0
    for shape in getattr(event, "input_shapes", None) or ():
        count = 1
        for size in shape if isinstance(shape, (list, tuple)) else ():
            count *= int(size)
        total += count
    return total


def wall_share(solve_us: float, launch_us: float) -> WorkEvidence:
    """The CPU target's evidence: the DSL's launches against the whole call's wall time."""
    return WorkEvidence("launch_wall_time", dsl_us=launch_us, torch_compute_us=max(solve_us - launch_us, 0.0))
