"""Validity screens for a problem itself (METR / KernelBench lessons): a problem whose outputs a trivial kernel
can match is not a benchmark problem.

- zeros: an all-zeros output must fail the tolerance;
- seed: outputs must change with the seed (an input generator that ignores the RNG invites caching);
- constant: no output may be near-constant (std <= 1e-3 of its magnitude), which a broadcast kernel would pass.
"""
from __future__ import annotations

from typing import Any

import torch

from .correctness import compare, expected_outputs
from .problem_loader import load_problem
from pathlib import Path


def _draw(problem: Any, seed: int, device: str) -> list[Any]:
    torch.manual_seed(seed)
    with torch.device(device):
        return list(problem.make_inputs())


def run_screens(problem_path: str, problem_id: str, preset: str, device: str, seed: int) -> dict[str, Any]:
    problem = load_problem(Path(problem_path), problem_id, preset)
    checks: list[dict[str, Any]] = []

    def record(name: str, passed: bool, detail: str) -> None:
        checks.append({"name": name, "passed": passed, "detail": detail})

    first = expected_outputs(problem.reference, _draw(problem, seed, device), problem.mutates)
    second = expected_outputs(problem.reference, _draw(problem, seed + 1, device), problem.mutates)
    if not first.native:
        record("outputs", False, "the reference returns nothing and mutates nothing")
        return {"problem_id": problem_id, "problem_hash": problem.problem_hash, "checks": checks}
    zeros = [torch.zeros_like(t) if isinstance(t, torch.Tensor) else t for t in first.native]
    outcome = compare(zeros, first, problem.tolerance)
    record("zeros_fail", not outcome.passed, f"all-zeros outputs: {outcome.detail}")
    for index, (a, b) in enumerate(zip(first.native, second.native)):
        if not isinstance(a, torch.Tensor):
            continue
        changed = not torch.equal(a, b)
        record("seed_changes_output", changed,
               f"output {index} {'differs' if changed else 'is identical'} across seeds")
        values = a.detach().to(torch.float64).flatten()
        values = values[torch.isfinite(values)]  # masked -inf entries (scores) are legitimate; the rest must vary
        magnitude = float(values.abs().max()) if values.numel() else 0.0
        spread = float(values.std()) if values.numel() > 1 else 0.0
        if values.numel() <= 1:  # a scalar has no spread: it is not constant when it moves with the seed
            record("not_constant", changed, f"output {index}: one value, {'' if changed else 'not '}moving with "
                                            f"the seed")
            continue
        varied = magnitude > 0 and spread > 1e-3 * magnitude
        record("not_constant", varied, f"output {index}: std {spread:.3g} vs max|x| {magnitude:.3g}")
    return {"problem_id": problem_id, "problem_hash": problem.problem_hash, "checks": checks}
