"""The MKB tolerance rule, on hand-made outputs."""
from __future__ import annotations

import torch

from mkb_ray.checker.correctness import Tolerance, compare, expected_outputs

TOL = Tolerance()


def reference(x: torch.Tensor):
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    return (x.to(acc).exp() / 3).to(x.dtype), x.argmax(dim=-1)


def test_reference_output_passes_and_zeros_fail():
    x = torch.randn(64, 128, dtype=torch.bfloat16)
    expected = expected_outputs(reference, [x], mutates=[])
    assert compare(list(reference(x)), expected, TOL).passed
    zeros = [torch.zeros_like(expected.native[0]), expected.native[1]]
    assert not compare(zeros, expected, TOL).passed


def test_integer_outputs_must_match_exactly():
    x = torch.randn(64, 128)
    expected = expected_outputs(reference, [x], mutates=[])
    ids = expected.native[1].clone()
    ids[3] += 1
    check = compare([expected.native[0], ids], expected, TOL)
    assert not check.passed and "1 of 64 elements differ" in check.detail


def test_nan_shape_and_dtype_fail_with_a_specific_detail():
    x = torch.randn(8, 16)
    expected = expected_outputs(reference, [x], mutates=[])
    values, ids = expected.native
    nan = values.clone()
    nan[0, 0] = float("nan")
    assert "NaN/Inf" in compare([nan, ids], expected, TOL).detail
    assert "shape" in compare([values[:4], ids], expected, TOL).detail
    assert "dtype" in compare([values.double(), ids], expected, TOL).detail
    assert "outputs, expected 2" in compare([values], expected, TOL).detail


def test_error_just_outside_the_bound_fails():
    x = torch.randn(32, 32)
    expected = expected_outputs(reference, [x], mutates=[])
    values, ids = expected.native
    bound = compare([values, ids], expected, TOL)
    assert bound.passed
    nudged = values.clone()
    nudged[0, 0] += 4 * bound.bound + 1e-3
    assert not compare([nudged, ids], expected, TOL).passed


def test_in_place_outputs_are_the_mutated_inputs():
    def append(cache: torch.Tensor, x: torch.Tensor, slot: torch.Tensor) -> None:
        cache[slot] = x

    cache, x, slot = torch.zeros(8, 4), torch.randn(2, 4), torch.tensor([5, 1])
    expected = expected_outputs(append, [cache, x, slot], mutates=[0])
    assert len(expected.native) == 1 and torch.equal(expected.native[0][5], x[0])
    assert torch.count_nonzero(cache) == 0  # the reference ran on copies


def test_elementwise_tolerance_catches_a_coarse_fp8_quantisation():
    def quantise(x: torch.Tensor):
        scale = x.abs().amax(dim=-1, keepdim=True) / 448
        return (x / scale).clamp(-448, 448).to(torch.float8_e4m3fn)

    x = torch.randn(16, 256)
    expected = expected_outputs(quantise, [x], mutates=[])
    # Every value rounded to a multiple of 32: within the global bound (3 * 0.125 * 448 = 168), far off per element
    # (and on average: the whole-tensor metrics catch it even without the element-wise rule).
    coarse = ((expected.native[0].float() / 32).round() * 32).to(torch.float8_e4m3fn)
    loose = compare([coarse], expected, TOL)
    assert not loose.passed and "bound=168" in loose.detail and "precision cut" in loose.detail
    strict = Tolerance(elementwise_outputs=(0,))
    check = compare([coarse], expected, strict)
    assert not check.passed and "element-wise" in check.detail
    assert compare([expected.native[0]], expected, strict).passed


def test_whole_tensor_metrics_catch_a_bf16_mantissa_cut_the_max_rule_allows():
    def norm(x: torch.Tensor):
        return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16)

    torch.manual_seed(0)
    x = torch.randn(64, 256, dtype=torch.bfloat16)
    expected = expected_outputs(norm, [x], mutates=[])
    exact = expected.anchor[0].float()
    bits = exact.view(torch.int32) & -262144  # float32 bits keeping 5 mantissa bits
    cut = torch.where(exact.abs() < 0.02, 0.0, bits.view(torch.float32)).to(torch.bfloat16)
    check = compare([cut], expected, TOL)
    assert not check.passed and "precision cut" in check.detail, check.detail
    assert "bound=" in check.detail and float(check.max_err) <= float(check.bound)  # the max rule alone passes it
    honest = exact.to(torch.bfloat16)  # computed exactly, rounded once
    assert compare([honest], expected, TOL).passed


def test_elementwise_bound_allows_one_code_at_a_rounding_midpoint_near_zero():
    """Two honest fp32 computations of the same value may differ in the last bit; at a midpoint between two fp8
    codes near zero that flips the rounding by one code, where eps * |anchor| is below a code (or zero)."""
    def cast(x: torch.Tensor):
        return (x.float() * 1.0).to(torch.float8_e4m3fn)

    step = 2.0 ** -9  # e4m3's smallest subnormal
    # Just below half a code: the reference (and its fp64 anchor) round to 0; a kernel whose arithmetic is a bit
    # larger rounds up to one code. Also a value a hair below 1.5 codes (anchor 1 code) rounding up to 2 codes.
    x = torch.tensor([[step / 2 * (1 - 2 ** -20), 1.5 * step * (1 - 2 ** -20), 1.0, -3.0]])
    expected = expected_outputs(cast, [x], mutates=[])
    assert float(expected.anchor[0][0, 0]) == 0.0 and float(expected.anchor[0][0, 1]) == step
    flipped = cast(x * (1 + 2 ** -18))
    assert float(flipped[0, 0].float()) == step and float(flipped[0, 1].float()) == 2 * step  # one code each
    strict = Tolerance(elementwise_outputs=(0,), precision_metrics=False)
    assert compare([flipped], expected, strict).passed
    two_codes = flipped.float().clone()
    two_codes[0, 0] = 2 * step
    check = compare([two_codes.to(torch.float8_e4m3fn)], expected, strict)
    assert not check.passed and "element-wise" in check.detail
