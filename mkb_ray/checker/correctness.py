"""The MetaKernelBench correctness contract: a float64 anchor, a tolerance scaled by the reference's own error.

A float output passes when  max|out - anchor| <= factor * max(ref_err, eps(dtype) * max|anchor|) + min_abs,
where anchor is the reference run on float64 copies of the inputs and ref_err is the error of the reference run
in the inputs' own dtypes. Integer and boolean outputs must equal the reference exactly. Non-finite values must
sit exactly where the anchor has them.

Outputs a problem lists in `elementwise_outputs` get the same rule per element instead:
|out_i - anchor_i| <= max(factor * max(|ref_i - anchor_i|, eps(dtype) * |anchor_i|), step(dtype)) + min_abs, where
step is the dtype's smallest subnormal (one code at zero: 2^-9 for e4m3): a pre-cast value at a rounding midpoint
near zero lands one code either side of the anchor's for an honest kernel whose fp32 arithmetic differs in the
last bit, and there eps * |anchor_i| is smaller than a code (zero where the anchor is zero). For 8-bit floats the
global rule allows ±3·0.125·max|anchor| (±168 for a full-range fp8 cache), which a wrong quantisation passes.

Low-precision float outputs (2 bytes or fewer: bf16, fp16, fp8) must also pass three whole-tensor metrics
(KernelBenchX's checks for quantised outputs), each within `METRIC_FACTOR` of the reference's own value or of the
dtype's rounding floor (eps/4: the mean relative error of one round-to-nearest), whichever is larger:
relative L1 (Σ|out − anchor| / Σ|anchor|), RMSE relative to the anchor's RMS, and cosine distance. A cut that
stays under the global max rule — a 5-bit mantissa on a bf16 output, small values flushed to zero, fp8 codes
rounded to powers of two — moves every element a little, which these averages see.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch


METRIC_FACTOR = 2.0


@dataclass(frozen=True)
class Tolerance:
    """A problem's tolerance policy (sidecar `[tolerance]`)."""

    factor: float = 3.0
    min_abs: float = 0.0
    elementwise_outputs: tuple[int, ...] = ()  # indices into the flat outputs (returned, then mutated inputs)
    precision_metrics: bool = True  # the three whole-tensor metrics for outputs of 2 bytes or fewer

    def global_rule_only(self) -> "Tolerance":
        """MetaKernelBench's rule alone: no element-wise bounds, no precision metrics (protocol 'mkb')."""
        return Tolerance(self.factor, self.min_abs, (), False)


@dataclass
class OutputCheck:
    passed: bool
    detail: str
    max_err: float = 0.0
    bound: float = 0.0


def flatten_outputs(result: Any) -> list[Any]:
    """The reference's return value as a flat list (None for no return value)."""
    if result is None:
        return []
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result]


def to_anchor_inputs(inputs: Sequence[Any]) -> list[Any]:
    """Float64 copies of the floating inputs (on the same device); everything else cloned as is."""
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            out.append(x.detach().to(torch.float64) if x.is_floating_point() else x.detach().clone())
        else:
            out.append(x)
    return out


def clone_inputs(inputs: Sequence[Any]) -> list[Any]:
    return [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs]


@dataclass
class Expected:
    """What `solve` must produce for one draw: the reference's outputs in native dtypes and in float64."""

    native: list[Any]
    anchor: list[Any]


def expected_outputs(reference: Callable[..., Any], inputs: Sequence[Any], mutates: Sequence[int]) -> Expected:
    native_inputs = clone_inputs(inputs)
    anchor_inputs = to_anchor_inputs(inputs)
    native = flatten_outputs(reference(*native_inputs)) + [native_inputs[i] for i in mutates]
    anchor = flatten_outputs(reference(*anchor_inputs)) + [anchor_inputs[i] for i in mutates]
    return Expected(native, anchor)


def produced_outputs(result: Any, inputs: Sequence[Any], mutates: Sequence[int]) -> list[Any]:
    return flatten_outputs(result) + [inputs[i] for i in mutates]


def _compare_one(out: Any, native: Any, anchor: Any, factor: float, min_abs: float, elementwise: bool,
                 precision_metrics: bool = True) -> OutputCheck:
    if not isinstance(native, torch.Tensor):
        ok = out == native
        return OutputCheck(bool(ok), "equal" if ok else f"expected {native!r}, got {out!r}")
    if not isinstance(out, torch.Tensor):
        return OutputCheck(False, f"expected a tensor, got {type(out).__name__}")
    if tuple(out.shape) != tuple(native.shape):
        return OutputCheck(False, f"shape {tuple(out.shape)} != expected {tuple(native.shape)}")
    if out.dtype != native.dtype:
        return OutputCheck(False, f"dtype {out.dtype} != expected {native.dtype}")
    if out.device.type != native.device.type:
        return OutputCheck(False, f"device {out.device} != expected {native.device}")
    if not native.is_floating_point():
        mismatches = int((out != native).sum())
        return OutputCheck(mismatches == 0, f"{mismatches} of {native.numel()} elements differ (exact match required)",
                           float(mismatches))
    got = out.detach().to(torch.float64)
    want = anchor.detach().to(torch.float64)
    finite = torch.isfinite(want)
    if not bool(torch.equal(torch.isfinite(got), finite)):
        bad = int((torch.isfinite(got) != finite).sum())
        return OutputCheck(False, f"{bad} elements are NaN/Inf where the anchor is finite (or the reverse)")
    if not bool(finite.all()) and not bool(torch.equal(got[~finite].nan_to_num(), want[~finite].nan_to_num())):
        return OutputCheck(False, "non-finite values differ from the anchor's")
    if not bool(finite.any()):
        return OutputCheck(True, "all values non-finite and matching")
    eps = torch.finfo(native.dtype).eps
    ref_errors = (native.detach().to(torch.float64) - want)[finite].abs()
    errors = (got - want)[finite].abs()
    if elementwise:
        step = torch.finfo(native.dtype).smallest_normal * eps  # the smallest subnormal: one code at zero
        bounds = (factor * torch.maximum(ref_errors, eps * want[finite].abs())).clamp(min=step) + min_abs
        over = errors > bounds
        worst = int(torch.argmax(errors - bounds))
        max_err, bound = float(errors[worst]), float(bounds[worst])
        passed = not bool(over.any())
        detail = (f"{int(over.sum())} of {errors.numel()} elements outside their element-wise bound (worst "
                  f"|out-anchor|={max_err:.3g} vs {bound:.3g})")
    else:
        ref_err = float(ref_errors.max())
        bound = factor * max(ref_err, eps * float(want[finite].abs().max())) + min_abs
        max_err = float(errors.max())
        passed = max_err <= bound
        detail = f"max|out-anchor|={max_err:.3g} bound={bound:.3g} (ref_err={ref_err:.3g})"
    if not passed or native.element_size() > 2 or not precision_metrics:
        return OutputCheck(passed, detail, max_err, bound)
    cut = _precision_cut(got[finite], native.detach().to(torch.float64)[finite], want[finite], eps)
    if cut:
        return OutputCheck(False, f"{detail}, but {cut}", max_err, bound)
    return OutputCheck(True, detail, max_err, bound)


def _metrics(values: torch.Tensor, anchor: torch.Tensor) -> tuple[float, float, float]:
    """Relative L1, RMSE relative to the anchor's RMS, cosine distance."""
    difference = values - anchor
    scale = float(anchor.abs().sum())
    rms = float(anchor.pow(2).mean().sqrt())
    rel_l1 = float(difference.abs().sum()) / scale if scale > 0 else float(difference.abs().sum())
    rel_rmse = float(difference.pow(2).mean().sqrt()) / rms if rms > 0 else float(difference.pow(2).mean().sqrt())
    norms = float(values.norm() * anchor.norm())
    cosine = 1.0 - float((values * anchor).sum()) / norms if norms > 0 else (0.0 if float(values.norm()) == 0 else 1.0)
    return rel_l1, rel_rmse, max(cosine, 0.0)


def _precision_cut(got: torch.Tensor, native: torch.Tensor, anchor: torch.Tensor, eps: float) -> str:
    """Which whole-tensor metric shows a precision cut the max rule let through ('' when none does)."""
    if got.numel() < 16:
        return ""
    floor = eps / 4
    floors = (floor, floor, floor * floor / 2)  # cosine distance ≈ (relative error)² / 2
    names = ("relative L1", "relative RMSE", "cosine distance")
    for name, value, reference, lowest in zip(names, _metrics(got, anchor), _metrics(native, anchor), floors):
        limit = METRIC_FACTOR * max(reference, lowest)
        if value > limit:
            return (f"{name} {value:.3g} exceeds {limit:.3g} ({METRIC_FACTOR:g}× the reference's {reference:.3g} "
                    f"or the dtype's rounding floor {lowest:.3g}): a precision cut")
    return ""


def compare(outputs: Sequence[Any], expected: Expected, tolerance: Tolerance) -> OutputCheck:
    """Check every output; the first failing one decides the detail."""
    if len(outputs) != len(expected.native):
        return OutputCheck(False, f"{len(outputs)} outputs, expected {len(expected.native)}")
    worst = OutputCheck(True, "no outputs")
    for index, (out, native, anchor) in enumerate(zip(outputs, expected.native, expected.anchor)):
        check = _compare_one(out, native, anchor, tolerance.factor, tolerance.min_abs,
                             index in tolerance.elementwise_outputs, tolerance.precision_metrics)
        check.detail = f"output {index}: {check.detail}"
        if not check.passed:
            return check
        if index == 0 or check.max_err / max(check.bound, 1e-300) > worst.max_err / max(worst.bound, 1e-300):
            worst = check
    return worst
