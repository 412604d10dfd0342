"""One judgement, from a kernel file to a verdict dict: static checks → compile → correctness → integrity →
timing. The verdict's fields are documented on `mkb_ray.records.Verdict`, which validates this dict."""
from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch

from .correctness import compare, expected_outputs, produced_outputs
from .integrity import IdentityGuard, ThreadGuard, carries_dsl_values, output_type_problems
from .launches import CallRecord, LaunchMonitor
from .problem_loader import LoadedProblem, import_candidate, load_problem
from .request import JudgeRequest
from .static_checks import check_source
from .timing import time_draws

SCHEMA_VERSION = 1
POST_TIMING_SAMPLES = 4  # timed draws re-checked besides the last one
TIMING_AUDITS = 2  # probe + knockout audits at secret positions among the timed draws
KNOCKOUT_SEED_OFFSET = 7919  # the knockout call's draw, relative to its probe's


class Rejected(Exception):
    """A judgement ended early; carries the failing check's name."""

    def __init__(self, check: str, reason: str, compiled: bool = True) -> None:
        super().__init__(reason)
        self.check, self.reason, self.compiled = check, reason, compiled


@dataclass
class CheckLog:
    """The checks of one judgement in the order they ran; a failing check ends the judgement (`Rejected`)."""

    checks: list[dict[str, Any]] = field(default_factory=list)

    def check(self, name: str, passed: bool, detail: str) -> None:
        self.checks.append({"name": name, "passed": passed, "detail": detail})
        if not passed:
            raise Rejected(name, detail)

    def note(self, name: str, detail: str) -> None:
        self.checks.append({"name": name, "passed": True, "detail": detail})


class Judge:
    """Holds the per-submission state (problem, monitor, guards) for the steps of one judgement."""

    def __init__(self, request: JudgeRequest, verdict: CheckLog) -> None:
        self.request = request
        self.verdict = verdict
        self.on_gpu = request.device == "cuda" and torch.cuda.is_available()
        self.device_type = "cuda" if self.on_gpu else "cpu"
        self.problem: LoadedProblem = load_problem(Path(request.problem_path), request.problem_id, request.preset)
        cache = Path(request.ptx_cache_dir) if request.ptx_cache_dir else None
        self.monitor = LaunchMonitor(has_gpu=self.on_gpu, ptx_cache_dir=cache)
        self.monitor.install(request.dsl)
        self.identity = IdentityGuard(self.monitor.patched)
        self.threads = ThreadGuard()
        self.solve: Any = None
        self.phases_s: dict[str, float] = {}  # where the worker's time went, for the overhead benchmark
        self.dsl_outputs_only = True  # every output of every probed call was a buffer a DSL launch wrote

    def draw(self, seed: int, outlier: bool = False) -> list[Any]:
        torch.manual_seed(seed)
        with torch.device(self.device_type):
            inputs = list(self.problem.make_inputs())
        # Reseed from the OS: `torch.initial_seed()` would otherwise tell the kernel which draw (first call,
        # knockout, timing) it is serving.
        torch.seed()
        if outlier:
            for index in self.problem.outlier_inputs:
                inputs[index] = inputs[index] * self.problem.outlier_scale
        return inputs

    def call(self, inputs: Sequence[Any], mode: str = "execute", timed: bool = False) -> tuple[Any, CallRecord]:
        self.monitor.begin_call(mode)
        try:
            result = self.solve(*inputs)
            if self.on_gpu:
                torch.cuda.synchronize()
        except Exception as err:
            # The DSL front ends (TVMScript parsing, CuTe tracing) raise before or inside the compile call.
            from_dsl = type(err).__module__.split(".")[0] in ("tvm", "tvm_ffi", "cutlass")
            if self.monitor.compile_error or (from_dsl and self.monitor.current.launches == 0):
                message = self.monitor.compile_error or f"{type(err).__name__}: {err}"
                self.monitor.compile_error = message
                raise Rejected("compile", f"compile failed: {message}"[:4000], compiled=False) from err
            raise Rejected("runtime", f"solve raised {type(err).__name__}: {err}"[:4000]) from err
        finally:
            record = self.monitor.end_call()
        self.after_call(result, inputs, record, timed)
        return result, record

    def check_patches(self, full: bool = True) -> None:
        patched = self.identity.violations(full)
        if patched:
            self.identity.restore()
            self.verdict.check("monkey_patch", False, f"the submission replaced {', '.join(patched)}")

    def after_call(self, result: Any, inputs: Sequence[Any], record: CallRecord, timed: bool = False) -> None:
        # Inside the timed loop only the cheap named-function check runs; the full one follows the loop.
        self.check_patches(full=not timed)
        threads = self.threads.new_threads()
        if threads:
            self.verdict.check("threads", False, f"the submission left threads running: {threads}")
        if record.launches == 0 and self.monitor.mode != "compile_only":
            self.verdict.check("dsl_launch", False,
                               f"solve launched no {self.request.dsl} kernel (launch compiled kernels from the DSL's "
                               "compile entry point; eager PyTorch alone is not a submission)")
        problems = output_type_problems(produced_outputs(result, inputs, self.problem.mutates), self.device_type)
        if problems:
            self.verdict.check("output_type", False, "; ".join(problems))

    def correctness(self, seed: int, outlier: bool) -> str:
        inputs = self.draw(seed, outlier)
        expected = expected_outputs(self.problem.reference, inputs, self.problem.mutates)
        result, _ = self.call(inputs)
        outcome = compare(produced_outputs(result, inputs, self.problem.mutates), expected,
                          self.problem.tolerance)
        kind = "outlier draw" if outlier else "draw"
        self.verdict.check("correctness", outcome.passed, f"{kind} seed={seed}: {outcome.detail}")
        return outcome.detail

    def knockout(self, seed: int, when: str = "") -> None:
        """Probe which buffers the DSL launches write, then rerun with those launches suppressed and poisoned."""
        probe_inputs = self.draw(seed)
        expected = expected_outputs(self.problem.reference, probe_inputs, self.problem.mutates)
        probe_result, probe = self.call(probe_inputs, mode="probe")
        # The probe is a draw like any other (a kernel that counts calls must not get it for free); its provenance
        # is judged now and reported after the knockout, since a later call may reuse (and poison) its buffers.
        probe_outputs = produced_outputs(probe_result, probe_inputs, self.problem.mutates)
        outcome = compare(probe_outputs, expected, self.problem.tolerance)
        self.verdict.check("correctness", outcome.passed, f"probe draw seed={seed}{when}: {outcome.detail}")
        uncomputed = [index for index, out in enumerate(probe_outputs)
                      if isinstance(out, torch.Tensor) and out.numel() and not carries_dsl_values(out, probe.computed)]
        if probe.copy_only and all(probe.copy_only):
            self.verdict.check("copy_only", False, "every DSL launch only copied one of its inputs; the computation "
                               f"was done elsewhere{when}")
        # Fresh draws: with the probe's inputs again, a kernel replaying its previous outputs would "pass".
        for mode in ("knockout", "scramble"):
            inputs = self.draw(seed + KNOCKOUT_SEED_OFFSET + (mode == "scramble"))
            self.knockout_call(inputs, expected_outputs(self.problem.reference, inputs, self.problem.mutates), mode,
                               when)
        # Provenance is evidence, not a rule: MetaKernelBench lets eager PyTorch compute part of the outputs (the
        # knockouts above already demand that the outputs depend on what the DSL computed). Analyses can tell a
        # kernel that computed every output from one that left some to eager code.
        self.verdict.note("dsl_output", "every returned or mutated output is a buffer a DSL launch computed"
                          if not uncomputed else f"output(s) {uncomputed} were computed by eager code, not a DSL launch")
        self.dsl_outputs_only = self.dsl_outputs_only and not uncomputed

    def knockout_call(self, inputs: list[Any], expected: Any, mode: str, when: str) -> None:
        """One call with the DSL's results removed (`knockout`: launches suppressed, written buffers NaN; `scramble`:
        written buffers permuted after the launch); the outputs must then fail."""
        result, _ = self.call(inputs, mode=mode)
        outcome = compare(produced_outputs(result, inputs, self.problem.mutates), expected,
                          self.problem.tolerance)
        removed = ("with every DSL launch suppressed" if mode == "knockout" else
                   "with the DSL-written buffers replaced by a permutation of their own values")
        self.verdict.check("knockout", not outcome.passed,
                           f"outputs still pass {removed}{when}: they do not depend on what the DSL computed"
                           if outcome.passed else f"{removed} the outputs fail ({outcome.detail})")

    def timing(self) -> dict[str, Any]:
        request, problem, options = self.request, self.problem, self.request.options
        last = options.warmup + options.timed - 1
        timed = range(options.warmup, last + 1)
        secret = random.SystemRandom()  # the OS's randomness, which the kernel cannot see or reseed
        # Re-checked: the last timed draw and a secret sample of the others (a kernel that counts its calls would
        # otherwise know the one draw it has to get right).
        checked = {last, *secret.sample(timed[:-1], min(POST_TIMING_SAMPLES, max(len(timed) - 1, 0)))}
        # Probe + knockout audits slipped in after secret timed draws (untimed, fresh draws): a kernel that behaves
        # only while checked and switches to eager work plus a decoration launch while timed is caught there. A
        # knockout call can be recognised (the poison is visible after the launch); a probe call cannot.
        audits = set(secret.sample(timed, min(TIMING_AUDITS, len(timed))))
        pending: dict[int, tuple[list[Any], Any]] = {}
        rechecked: list[str] = []

        def draw(index: int) -> list[Any]:
            inputs = self.draw(request.seed + 1000 + index)
            if index in checked:
                pending[index] = (inputs, expected_outputs(problem.reference, inputs, problem.mutates))
            return inputs

        def check_result(index: int, result: Any) -> None:  # runs after the draw's time was taken
            if index in pending:
                inputs, expected = pending.pop(index)
                outcome = compare(produced_outputs(result, inputs, problem.mutates), expected,
                                  problem.tolerance)
                which = "last timed draw" if index == last else f"timed draw {index - options.warmup + 1}"
                rechecked.append(f"{which}: {outcome.detail}")
                if not outcome.passed:
                    self.verdict.check("post_timing", False, f"{which} of {options.timed} re-checked: {outcome.detail}")
            if index in audits:
                self.knockout(request.seed + 4000 + index, when=" (an audit between timed draws)")

        started = time.perf_counter()
        kernel = time_draws(lambda *xs: self.call(xs, timed=True)[0], draw, options.warmup, options.timed,
                            self.on_gpu, check_result)
        self.phases_s["timing_kernel"] = time.perf_counter() - started
        self.check_patches(full=True)
        self.verdict.check("post_timing", True, f"{len(rechecked)} timed draws re-checked; {rechecked[-1]}")
        reference = problem.reference
        eager = time_draws(reference, lambda i: self.draw(request.seed + 2000 + i), options.warmup, options.timed,
                           self.on_gpu)
        compiled_ms = None
        if options.compile_baseline:
            compiled_reference = torch.compile(reference)
            compiled_ms = time_draws(compiled_reference, lambda i: self.draw(request.seed + 3000 + i), options.warmup,
                                     options.timed, self.on_gpu).median_ms
        self.phases_s["timing_baselines"] = time.perf_counter() - started - self.phases_s["timing_kernel"]
        return {"kernel_ms": kernel.median_ms, "kernel_min_ms": kernel.min_ms, "eager_ms": eager.median_ms,
                "torch_compile_ms": compiled_ms, "timing_method": kernel.method, "timed_draws": kernel.samples}


class _Laps:
    """Seconds between successive marks, recorded under the phase names."""

    def __init__(self, started: float) -> None:
        self.last = started

    def mark(self, phases: dict[str, float], name: str) -> None:
        now = time.perf_counter()
        phases[name] = now - self.last
        self.last = now


def _device_name(on_gpu: bool) -> str:
    if on_gpu:
        return torch.cuda.get_device_name(0)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu"


def _base_fields(request: JudgeRequest, source: str) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION, "problem_id": request.problem_id, "dsl": request.dsl,
        "device": request.device, "preset": request.preset, "seed": request.seed,
        "source_hash": hashlib.sha256(source.encode()).hexdigest(), "compiled": False, "executed": False,
        "correct": None, "tier": "fail", "kernel_ms": None, "eager_ms": None, "torch_compile_ms": None,
        "speedup": None, "rejected_by": None, "reason": "", "timing_method": None, "target": None,
        "device_name": None, "problem_hash": None, "compile_s": 0.0, "launches_per_call": None,
    }


def run(request: JudgeRequest) -> dict[str, Any]:
    """Judge one kernel; always returns a verdict dict (failures are verdicts, not exceptions)."""
    started = time.perf_counter()
    lap = _Laps(started)
    source = Path(request.kernel_path).read_text(errors="replace")
    verdict = CheckLog()
    fields = _base_fields(request, source)
    judge: Judge | None = None
    try:
        violations = [] if request.options.skip_static_checks else check_source(source, request.dsl)
        verdict.check("static", not violations, "; ".join(v.describe() for v in violations) or "source rules hold")
        judge = Judge(request, verdict)
        fields.update(problem_hash=judge.problem.problem_hash, device_name=_device_name(judge.on_gpu),
                      shapes=judge.problem.shapes)
        try:
            judge.solve = import_candidate(Path(request.kernel_path)).solve
        except Exception as err:
            raise Rejected("import", f"importing the kernel failed: {type(err).__name__}: {err}", compiled=False)
        lap.mark(judge.phases_s, "setup")
        _, first = judge.call(judge.draw(request.seed))
        lap.mark(judge.phases_s, "first_call")
        fields.update(compiled=bool(judge.monitor.compiles), launches_per_call=first.launches,
                      target=judge.monitor.compiles[0].target if judge.monitor.compiles else None)
        if first.stub_launches:
            judge.monitor.force_compile_only()
            ptx = sum(c.ptx_bytes for c in judge.monitor.compiles)
            verdict.note("compile", f"{len(judge.monitor.compiles)} kernel(s) compiled to PTX ({ptx} bytes)")
            fields.update(tier="compile_only", reason=(
                f"compile-only: no GPU here; {len(judge.monitor.compiles)} {request.dsl} kernel(s) compiled to "
                f"{fields['target']} PTX ({ptx} bytes), not executed, so correctness and speed are unknown"))
            return _finish(fields, verdict, judge, started)
        fields["executed"] = True
        options = request.options
        details = [judge.correctness(request.seed + i, outlier=False) for i in range(options.correctness_draws)]
        if judge.problem.outlier_inputs:
            details += [judge.correctness(request.seed + 100 + i, outlier=True) for i in range(options.outlier_draws)]
        fields["correct"] = True
        lap.mark(judge.phases_s, "correctness")
        judge.knockout(request.seed + 500)
        lap.mark(judge.phases_s, "knockout")
        fields.update(judge.timing())
        fields["speedup"] = fields["eager_ms"] / fields["kernel_ms"] if fields["kernel_ms"] > 0 else None
        fields["tier"] = "pass2x" if (fields["speedup"] or 0) >= 2.0 else "pass"
        fields["reason"] = (f"correct on {len(details)} draws; {fields['speedup']:.2f}x eager "
                            f"({fields['kernel_ms']:.4g} ms vs {fields['eager_ms']:.4g} ms)"
                            + ("" if judge.dsl_outputs_only else "; some outputs computed by eager code (dsl_output)"))
    except Rejected as rejected:
        fields.update(rejected_by=rejected.check, reason=rejected.reason, tier="fail")
        if rejected.check in ("correctness", "post_timing"):
            fields["correct"] = False
    except Exception as err:  # the judge's own failure (e.g. a broken problem): reported, never hidden
        fields.update(rejected_by="judge_error", reason=f"judge error: {type(err).__name__}: {err}"[:4000])
    return _finish(fields, verdict, judge, started)


def _finish(fields: dict[str, Any], verdict: CheckLog, judge: Judge | None, started: float) -> dict[str, Any]:
    if judge is not None:
        monitor = judge.monitor
        fields["phases_s"] = judge.phases_s
        fields["dsl_outputs_only"] = judge.dsl_outputs_only if fields["correct"] else None
        fields["compiled"] = bool(monitor.compiles) and monitor.compile_error is None
        fields["compile_s"] = sum(c.seconds for c in monitor.compiles)
        fields["compiles"] = [vars(c) for c in judge.monitor.compiles]
    fields["checks"] = verdict.checks
    fields["worker_s"] = time.perf_counter() - started
    return fields
