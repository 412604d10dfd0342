"""The adversarial suite: every file in tests/adversarial/ tries to get a passing verdict dishonestly, and the judge
must reject it with the specific check its header names.

Header of each hack file (first lines, exactly this form; the last line is optional):

    # mkb-adversarial: dsl=<cutedsl|tirx> device=<cpu|cuda> expect=<check name>[|<check name>...]
    # problem: <family>/<NN_name>
    # hack: <what it tries>
    # must be rejected because: <why>
    # skip-static: true
    # draws-per-trip: 5

Alternatives (`expect=post_timing|correctness`) are for hacks that secret checks catch at a random point: whichever
of the named checks comes first. `skip-static: true` judges with the source rules off, to prove that the runtime guard
behind a static rule works by itself. `draws-per-trip: k` judges with k timed draws per round trip (the GPU default is
5, the CPU target's 1), for hacks aimed at the batched round trip to run where the suite runs: on the CPU. GPU hacks
(device=cuda) whose rejection needs a kernel to run are skipped where there is no GPU; static rejections (and the few
other checks decided before any kernel executes) run everywhere.
File names: `cute_*` and `tirx_gpu_*` are GPU hacks (`.ci/gpu-check` runs them on the H200); the rest target the CPU.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

from mkb_ray.judge import JudgeOptions, judge_kernel
from mkb_ray.judge import JudgeLimits

SUITE = Path(__file__).resolve().parent / "adversarial"
HEADER = re.compile(
    r"# mkb-adversarial: dsl=(?P<dsl>cutedsl|tirx) device=(?P<device>cpu|cuda) expect=(?P<expect>\w+(?:\|\w+)*)\n"
    r"# problem: (?P<problem>[\w/]+)\n"
    r"# hack: (?P<hack>.+)\n"
    r"# must be rejected because: (?P<because>.+)\n"
    r"(?P<skip_static># skip-static: true\n)?"
    r"(?:# draws-per-trip: (?P<per_trip>\d+)\n)?")
# Every check name a verdict can carry as `rejected_by` (worker checks, then the parent's process-level ones).
CHECKS = {"static", "import", "compile", "runtime", "dsl_launch", "output_type", "monkey_patch", "threads",
          "correctness", "knockout", "copy_only", "dsl_output", "post_timing", "timeout", "memory_limit", "crash",
          "in_place", "input_mutated", "decoration", "protocol", "early_work"}
# Decided by the source rules, the import, the compile or the guards after the first call: on a machine without a
# GPU a cuda kernel is still imported, compiled and called once (compile-only), so these need no GPU.
DECIDED_WITHOUT_EXECUTION = {"static", "import", "compile", "monkey_patch", "threads"}
GPU_SKIP_REASON = "needs a GPU to execute; compile-only here"
# Small limits for the hacks that test the limits (the worker itself starts in ~2 s and stays under ~1 GiB).
TIMEOUT_LIMITS = JudgeLimits(timeout_s=15)
MEMORY_LIMITS = JudgeLimits(timeout_s=120, memory_mb=2000)
DEFAULT_LIMITS = JudgeLimits(timeout_s=180)  # a hack that unexpectedly hangs fails the test instead of stalling it


@dataclass(frozen=True)
class Hack:
    path: Path
    dsl: str
    device: str
    expect: tuple[str, ...]
    problem: str
    hack: str
    because: str
    skip_static: bool
    draws_per_trip: Optional[int] = None


def parse_header(path: Path) -> Hack:
    match = HEADER.match(path.read_text())
    if match is None:
        raise ValueError(f"{path.name}: missing or malformed '# mkb-adversarial:' header "
                         "(see tests/test_adversarial.py)")
    fields = match.groupdict()
    return Hack(path=path, dsl=fields["dsl"], device=fields["device"], expect=tuple(fields["expect"].split("|")),
                problem=fields["problem"], hack=fields["hack"].strip(), because=fields["because"].strip(),
                skip_static=fields["skip_static"] is not None,
                draws_per_trip=int(fields["per_trip"]) if fields["per_trip"] else None)


def hack_files() -> list[Path]:
    return sorted(SUITE.glob("*.py"))


def limits_for(hack: Hack) -> JudgeLimits:
    for check, limits in (("timeout", TIMEOUT_LIMITS), ("memory_limit", MEMORY_LIMITS)):
        if check in hack.expect:
            return limits
    return DEFAULT_LIMITS


def test_suite_is_large_and_covers_both_dsls():
    hacks = [parse_header(path) for path in hack_files()]
    assert len(hacks) >= 20
    assert {h.dsl for h in hacks} == {"cutedsl", "tirx"}
    assert sum(h.dsl == "cutedsl" for h in hacks) >= 5


@pytest.mark.parametrize("path", hack_files(), ids=lambda p: p.stem)
def test_header_is_well_formed(path: Path):
    hack = parse_header(path)
    unknown = set(hack.expect) - CHECKS
    assert not unknown, f"{path.name}: unknown check(s) {sorted(unknown)}"
    assert hack.hack and hack.because


@pytest.mark.parametrize("path", hack_files(), ids=lambda p: p.stem)
def test_hack_is_rejected_for_its_reason(path: Path, problems, checker_pool, baseline_cache):
    hack = parse_header(path)
    if hack.device == "cuda" and not set(hack.expect) <= DECIDED_WITHOUT_EXECUTION:
        import torch

        if not torch.cuda.is_available():
            pytest.skip(GPU_SKIP_REASON)
    # The production protocol (10 warm-up + 50 timed draws): with fewer, every timed draw is re-checked and the
    # secret sampling never runs.
    verdict = judge_kernel(problems.get(hack.problem), path, hack.dsl, hack.device, limits=limits_for(hack),
                           options=JudgeOptions(skip_static_checks=hack.skip_static,
                                                draws_per_trip=hack.draws_per_trip), pool=checker_pool,
                           baseline_cache_dir=baseline_cache)
    context = f"{path.name} (seed {verdict.seed}): {verdict.tier}/{verdict.rejected_by}: {verdict.reason[:500]}"
    assert verdict.tier == "fail", context
    assert verdict.rejected_by in hack.expect, context
    assert verdict.reason.strip(), context
