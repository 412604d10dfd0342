"""The checker: one judgement, from a kernel file to a verdict dict. static checks → compile → correctness →
integrity → timing. The verdict's fields are documented on `mkb_ray.records.Verdict`, which validates this dict.

Trust boundary: no candidate code runs in this process. The candidate runs in a sandboxed kernel process
(`KernelProcess`), which is handed each draw's inputs through the exchange buffer and returns its outputs the
same way. Inputs, the reference, the float64 anchor, the schedule of re-checks and audits, every time and the
verdict exist only here (problems/CONTRACT.md, "Trust model").
"""
from __future__ import annotations

import hashlib
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import torch

from .baselines import Baselines, cache_key, cached_or_measured, measure
from .correctness import Expected, compare, expected_outputs
from .device_lock import DeviceLock
from .kernel_process import ForkedSpare, KernelProcess, Rejected
from .problem_loader import LoadedProblem, load_problem
from .request import JudgeRequest
from .sandbox import SandboxLimits
from .session import READY_TIMEOUT_S, KernelSession, bank_bytes, copy_into
from .static_checks import check_source
from .timing import (TIMING_RESOLUTION, WALL_BOUND_RATIO, RoundTripTimer, TimedSeries, draws_per_trip, time_draws,
                     timing_resolved)
from .profiled_twins import ProfiledTwins
from .work_share import (EAGER_ELEMENTS_YARDSTICK, EAGER_YARDSTICK, PROFILED_CALLS_BEFORE_TIMING, TIME_FIELDS,
                         PooledWork, WallSplits, microseconds)

SCHEMA_VERSION = 2
POST_TIMING_SAMPLES = 4  # timed draws re-checked besides the last one
TIMING_AUDITS = 2  # probe + knockout audits at secret positions among the timed draws
KNOCKOUT_SEED_OFFSET = 7919  # the knockout call's draw, relative to its probe's
REFERENCE_PROFILES = 5  # timed and profiled reference calls behind the yardsticks
CALL_TIMEOUT_S = 300.0  # one solve call (the first one compiles); the parent's limit bounds the whole judgement


@dataclass(frozen=True)
class ReferenceCost:
    """The reference's own cost per call, measured by the checker (the CPU target's yardsticks)."""

    wall_us: float
    compute_us: float
    compute_elements: float


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
    """The per-submission state of the checker: the problem, the kernel session, what was learnt so far."""

    def __init__(self, request: JudgeRequest, log: CheckLog, process: KernelProcess, lock: DeviceLock,
                 spare: Optional[ForkedSpare] = None) -> None:
        self.request, self.log, self.process, self.lock = request, log, process, lock
        self.spare = spare or ForkedSpare()  # a process forked ahead for the baselines, if the pool made one
        self.on_gpu = request.device == "cuda" and torch.cuda.is_available()
        self.device_type = "cuda" if self.on_gpu else "cpu"
        self.problem: LoadedProblem = load_problem(Path(request.problem_path), request.problem_id, request.preset)
        if request.options.protocol == "mkb":  # MetaKernelBench's global rule only
            self.problem.tolerance = self.problem.tolerance.global_rule_only()
        self.session: Optional[KernelSession] = None
        self.phases_s: dict[str, float] = {}
        self.useful_s = 0.0  # seconds the kernel process spent in calls of the candidate (round trips)
        self.dsl_outputs_only = True
        self.work = PooledWork()  # every profiled call's record of what ran, pooled (work_share)
        self.wall_splits = WallSplits()  # every executed call's wall time: inside the DSL's launches vs the rest
        self.twins = ProfiledTwins()  # each profiled call's DSL time beside its unprofiled twin's (same draw)
        self.per_trip = 1  # timed draws per round trip, fixed when the session starts (timing.draws_per_trip)
        self.final_compiles: Optional[dict[str, Any]] = None  # the kernel process's compile account, taken before
        # it is ended for the baselines (timing)
        self.secret = random.SystemRandom()  # the schedule (re-checks, audits, banks) exists only in this process

    def draw(self, seed: int, outlier: bool = False) -> list[Any]:
        return self.problem.draw(seed, outlier, self.device_type)

    def expected(self, inputs: list[Any]) -> Expected:
        return expected_outputs(self.problem.reference, inputs, self.problem.mutates)

    def returned_outputs(self, expected: Expected) -> list[torch.Tensor]:
        count = len(expected.native) - len(self.problem.mutates)
        outputs = expected.native[:count]
        if not all(isinstance(out, torch.Tensor) for out in outputs):
            raise ValueError("the reference returns a non-tensor output; the judge compares tensors only")
        return outputs

    def start(self, inputs: list[Any], expected: Expected) -> None:
        outputs = self.returned_outputs(expected)
        options = self.request.options
        requested = options.resolved(self.device_type).draws_per_trip or 1  # resolved() decides a None
        self.per_trip = draws_per_trip(requested, options.timed, bank_bytes(inputs, outputs), self.on_gpu)
        self.session = KernelSession(self.process, self.device_type, inputs, outputs, self.problem.mutates,
                                     banks=self.per_trip, flush_l2=options.flush_l2)
        name = copy_into(self.process, Path(self.request.kernel_path), "kernel.py")
        self.process.request({"op": "load", "kind": "candidate", "file": name, "dsl": self.request.dsl,
                              "ptx_cache_dir": self.request.ptx_cache_dir}, CALL_TIMEOUT_S)

    # ----- one call ---------------------------------------------------------------------------------------
    def call(self, inputs: list[Any], mode: str = "execute", profile: bool = False) -> tuple[list[Any], dict]:
        session = self.session
        assert session is not None
        bank = self.secret.randrange(self.per_trip)  # any bank may hold a checked draw: none is the "checked" one
        session.write_inputs(inputs, bank)
        started = time.perf_counter()
        reply = session.call(CALL_TIMEOUT_S, mode=mode, profile=profile, banks=(bank,))
        self.wall_splits.add(reply, profiled=profile)
        self.useful_s += time.perf_counter() - started
        return self.collect(bank), reply

    def collect(self, bank: int = 0) -> list[Any]:
        """The outputs a bank holds after the call that just returned, once the input contract was checked."""
        assert self.session is not None
        changed = self.session.unchanged_inputs_problem(bank)
        if changed:
            self.log.check("input_mutated", False, changed)
        return self.session.read_outputs(bank)

    def correctness(self, seed: int, outlier: bool) -> str:
        inputs = self.draw(seed, outlier)
        expected = self.expected(inputs)
        produced, _ = self.call(inputs)
        outcome = compare(produced, expected, self.problem.tolerance)
        kind = "outlier draw" if outlier else "draw"
        self.log.check("correctness", outcome.passed, f"{kind} seed={seed}: {outcome.detail}")
        return outcome.detail

    def knockout(self, seed: int, when: str = "") -> None:
        """Probe which buffers the DSL launches write, then rerun with those launches suppressed and poisoned."""
        inputs = self.draw(seed)
        expected = self.expected(inputs)
        produced, probe = self.call(inputs, mode="probe")
        outcome = compare(produced, expected, self.problem.tolerance)
        self.log.check("correctness", outcome.passed, f"probe draw seed={seed}{when}: {outcome.detail}")
        if probe.get("copy_only"):
            self.log.check("copy_only", False, "every DSL launch only copied one of its inputs; the computation "
                           f"was done elsewhere{when}")
        uncomputed = probe.get("uncomputed") or []
        for mode in ("knockout", "scramble"):
            draw = self.draw(seed + KNOCKOUT_SEED_OFFSET + (mode == "scramble"))
            expected_now = self.expected(draw)
            outputs, _ = self.call(draw, mode=mode)
            outcome = compare(outputs, expected_now, self.problem.tolerance)
            removed = ("with every DSL launch suppressed" if mode == "knockout" else
                       "with the DSL-written buffers replaced by a permutation of their own values")
            self.log.check("knockout", not outcome.passed,
                           f"outputs still pass {removed}{when}: they do not depend on what the DSL computed"
                           if outcome.passed else f"{removed} the outputs fail ({outcome.detail})")
        self.log.note("dsl_output", "every returned or mutated output is a buffer a DSL launch computed (as the "
                      "kernel process reports it)" if not uncomputed else
                      f"output(s) {uncomputed} were computed by eager code, not a DSL launch")
        self.dsl_outputs_only = self.dsl_outputs_only and not uncomputed

    def decoration(self, seed: int, when: str = "", calls: int = 1) -> None:
        """Profiled calls: PyTorch compute (or host code) doing more of the work than the DSL is decoration, not
        a kernel (the device's kernel record on the GPU; aten operators and numpy calls on the CPU target). The
        rule holds for the median of every profiled call so far (`work_share`): one call here, and more, up to
        `calls`, only while that median is below the bar."""
        for attempt in range(calls):
            inputs = self.draw(seed + attempt)
            expected = self.expected(inputs)
            # Its unprofiled twin first, on the same draw: the kernel cannot know that this draw is profiled next.
            twin_reply = None if self.on_gpu else self.unprofiled_twin(inputs, expected, f"seed={seed + attempt}{when}")
            produced, reply = self.call(inputs, profile=True)
            self.twins.add(twin_reply, reply)
            outcome = compare(produced, expected, self.problem.tolerance)
            self.log.check("correctness", outcome.passed,
                           f"profiled draw seed={seed + attempt}{when}: {outcome.detail}")
            record = reply.get("evidence")
            if not isinstance(record, dict):
                self.log.check("decoration", False, f"the profiled call{when} returned no record of what ran")
                return
            recorded = sum(microseconds(record.get(key)) for key in TIME_FIELDS)
            if self.on_gpu and recorded <= 0.0:  # fail, never pass: a kernel must not profit from an empty record
                self.log.check("decoration", False, f"the device recorded no kernel at all in the profiled call{when} "
                               "(no DSL, no PyTorch): the work was not done on the GPU, or the profiler could not "
                               "record (CUPTI needs free GPU memory for its buffers)")
                return
            if not self.led_in_time(record, when):
                return
            self.work.add(record)
            if self.work.passes:
                break
        detail = self.work.describe(self.on_gpu) + when
        self.log.check("decoration", self.work.passes,
                       detail if self.work.passes else f"eager PyTorch did the work: {detail}")

    def unprofiled_twin(self, inputs: list[Any], expected: Expected, label: str) -> dict:
        """An unprofiled call on a profiled call's draw, checked like any draw; its reply (`profiled_twins`). CPU
        target only: on a GPU the DSL's wall time is the host's launch time, which says nothing either way."""
        twin, reply = self.call(inputs)
        outcome = compare(twin, expected, self.problem.tolerance)
        self.log.check("correctness", outcome.passed, f"unprofiled twin of profiled draw {label}: {outcome.detail}")
        return reply

    def led_in_time(self, record: dict[str, Any], when: str) -> bool:
        """GPU: the profiled call's device record must begin with the draw clock's launch lead, and nothing of the
        call may have run beside it, before the call's `start` (kernel_runner/draw_clock.py): such work would be
        off the clock in every call, timed ones included."""
        if not self.on_gpu:
            return True
        if not record.get("lead_seen"):
            self.log.check("early_work", False, f"the profiled call{when}'s device record does not begin with the "
                           "harness's launch lead, so whether work ran before the clock started cannot be judged")
            return False
        early = record.get("early_events") or {}
        if early:
            names = ", ".join(f"{name} x{count}" for name, count in list(early.items())[:5])
            self.log.check("early_work", False, f"in the profiled call{when}, device work ran before the call's clock "
                           f"started, beside the launch lead ({microseconds(record.get('early_us')):.1f} µs: "
                           f"{names}): work on another stream must wait for the current stream")
            return False
        return True

    def yardstick(self, eager_device_ms: Optional[float] = None) -> None:
        """After timing. The share rule compares two times the kernel controls (a DSL launch that casts and then
        spins buys share), so each target also holds the work outside the DSL against the reference's own cost,
        which a kernel cannot inflate. GPU: time in kernels no DSL compile produced against each profiled call's own
        device compute and against `eager_device_ms`, the eager reference's device time per call
        (`PooledWork.foreign_check`). CPU target: the kernel's eager part
        against the reference's own cost per call, measured here (`reference_per_call`):
        - a rule: the DSL's launches in each profiled call's unprofiled twin, on the same draw, against the profiled
          call's (`profiled_twins`: a kernel that can tell profiled calls apart keeps the DSL's work for them);
        - a rule: eager compute in the median profiled call against the reference's compute (EAGER_YARDSTICK);
        - evidence: the time outside the DSL's launches in the median unprofiled call against the reference's whole
          call. It would see compute the profiler cannot attribute and work done only where nothing profiles, but
          at smoke shapes honest Python glue reaches 24 % of the reference's call on an idle CPU and 79 % on a
          loaded one, while an eager copy of the reference reads 50-80 %: no bar separates them (problems/CONTRACT.md,
          'Limits we know of')."""
        if not self.work.calls:
            return
        if self.on_gpu:
            # The GPU's yardstick: work in kernels no DSL compile produced, against each profiled call's own device
            # compute and against the eager reference's device time (the checker's own baseline). Eager PyTorch
            # compute is not held to a bar here until the shipped solutions' share of it is measured on the GPU; a
            # kernel that spins buys share, not a smaller eager part.
            if self.work.highest_foreign_share > 0:
                passed, detail = self.work.foreign_check(eager_device_ms)
                self.log.check("decoration", passed, detail if passed else
                               f"code outside the DSL did the reference's work: {detail}")
            return
        # Every profiled call's twin so far, the audits' among them: the median pair decides (profiled_twins).
        twins = self.twins.check()
        if twins is not None:
            passed, detail = twins
            self.log.check("decoration", passed, detail if passed else f"the DSL's work is there only when "
                           f"profiled: {detail}")
        reference = self.reference_per_call()
        if reference.compute_us and reference.compute_elements:
            eager, elements = self.work.median_compute_us, self.work.median_compute_elements
            time_ratio, element_ratio = eager / reference.compute_us, elements / reference.compute_elements
            detail = (f"eager compute in the median of {self.work.calls} profiled call(s): {eager:.0f} µs, "
                      f"{time_ratio:.0%} of the reference's own {reference.compute_us:.0f} µs per call (the bar: "
                      f"{EAGER_YARDSTICK:.0%}), on {elements:.0f} input elements, {element_ratio:.0%} of the "
                      f"reference's {reference.compute_elements:.0f} (the bar: {EAGER_ELEMENTS_YARDSTICK:.0%})")
            passed = time_ratio < EAGER_YARDSTICK or element_ratio < EAGER_ELEMENTS_YARDSTICK
            self.log.check("decoration", passed,
                           detail if passed else f"eager PyTorch did the reference's work: {detail}")
        self.wall_splits.reference_wall_us = reference.wall_us

    def reference_per_call(self) -> "ReferenceCost":
        """The reference's own cost per call on this target, measured here on the checker's copies (the reference
        never runs in the kernel process) with the kernel process's thread count: its wall time unprofiled, and its
        PyTorch compute profiled the way the kernel process profiles a candidate's calls; the median of
        REFERENCE_PROFILES fresh draws each (one warm-up call first)."""
        from ..kernel_runner.evidence import cpu_profiler, summarise_cpu

        walls, computes, elements = [], [], []
        threads = torch.get_num_threads()
        torch.set_num_threads(SandboxLimits().threads)
        try:
            with torch.no_grad():
                self.problem.reference(*self.draw(self.request.seed + 2499))
                for index in range(REFERENCE_PROFILES):
                    inputs = self.draw(self.request.seed + 2500 + index)
                    started = time.perf_counter()
                    self.problem.reference(*inputs)
                    walls.append((time.perf_counter() - started) * 1e6)
                    with cpu_profiler() as run:
                        self.problem.reference(*inputs)
                    evidence = summarise_cpu(run, 0.0)
                    computes.append(evidence.torch_compute_us)
                    elements.append(evidence.torch_compute_elements)
        finally:
            torch.set_num_threads(threads)
        return ReferenceCost(statistics.median(walls), statistics.median(computes), statistics.median(elements))

    # ----- timing -----------------------------------------------------------------------------------------
    def timing(self) -> dict[str, Any]:
        request, options, session = self.request, self.request.options, self.session
        assert session is not None
        last = options.warmup + options.timed - 1
        timed = range(options.warmup, last + 1)
        secret = self.secret
        checked = {last, *secret.sample(timed[:-1], min(POST_TIMING_SAMPLES, max(len(timed) - 1, 0)))}
        audits = set(secret.sample(timed, min(TIMING_AUDITS, len(timed))))
        # The expected outputs of every re-checked draw exist before the first trip, and every draw's outputs are
        # copied out after its trip: the time between trips is the same whether a trip holds a checked draw or
        # not. (Prepared trip by trip, the reference's run before a checked trip told the kernel which calls to
        # compute properly and which to skip: tests/adversarial/v3_idle_gap_schedule_leak.py.)
        pending = {index: self.expected(self.draw(request.seed + 1000 + index)) for index in sorted(checked)}
        produced: dict[int, list[Any]] = {}

        # Draw trip[j] goes to bank order[j], a fresh secret permutation per trip: which bank (and so which
        # address) a draw sits in says nothing about whether it is re-checked.
        order: list[int] = []

        def prepare(trip: range) -> None:
            order[:] = secret.sample(range(self.per_trip), len(trip))
            for bank, index in zip(order, trip):
                session.write_inputs(self.draw(request.seed + 1000 + index), bank)

        def after_call(trip: range, reply: Any) -> None:  # runs after the trip's time was taken
            self.wall_splits.add(reply)  # the trip's last call's split
            for bank, index in zip(list(order), trip):
                outputs = self.collect(bank)
                if index in pending:
                    produced[index] = outputs
            for index in trip:
                if index in audits:
                    when = " (an audit between timed draws)"
                    self.knockout(request.seed + 4000 + index, when=when)
                    # As before timing: a second and third profiled call only while the median is below the bar,
                    # so one call stalled by the machine (not the kernel) never decides an audit.
                    self.decoration(request.seed + 5000 + index, when=when, calls=PROFILED_CALLS_BEFORE_TIMING)

        timer = RoundTripTimer(self.on_gpu, session.fence if self.on_gpu else None, options.flush_l2)
        with self.lock.exclusive():  # no other judgement's work on the device while this one times
            started = time.perf_counter()
            series = time_draws(timer, prepare, lambda count: session.call(CALL_TIMEOUT_S, timed=True, banks=order),
                                options.warmup, options.timed, after_call, per_trip=self.per_trip)
            self.phases_s["timing_kernel"] = time.perf_counter() - started
        self.useful_s += series.wall.median_ms * (options.warmup + options.timed) / 1e3
        rechecked = []
        for index in sorted(produced):
            outcome = compare(produced[index], pending[index], self.problem.tolerance)
            which = "last timed draw" if index == last else f"timed draw {index - options.warmup + 1}"
            rechecked.append(f"{which}: {outcome.detail}")
            if not outcome.passed:
                self.log.check("post_timing", False, f"{which} of {options.timed} re-checked: {outcome.detail}")
        self.log.check("post_timing", True, f"{len(rechecked)} timed draws re-checked; {rechecked[-1]}")
        # The kernel process ends here, before the baselines are timed: nothing of the candidate (a child process,
        # a thread) can run beside them and slow the eager time its speedup is measured against
        # (tests/adversarial/v3_noisy_neighbour_slows_baselines.py). Its compile account is taken first.
        try:
            self.final_compiles = self.process.request({"op": "compiles"}, 30.0)
        except Rejected:  # its own account only informs the verdict (as in _finish)
            self.final_compiles = {}
        self.process.close()
        started = time.perf_counter()
        baselines = self.baselines()
        self.phases_s["timing_baselines"] = time.perf_counter() - started
        self.yardstick(baselines.eager_device_ms)
        if baselines.note:
            self.log.note("baselines", baselines.note)
        return self.reported_times(series, baselines)

    def reported_times(self, series: TimedSeries, baselines: Baselines) -> dict[str, Any]:
        """The verdict's times. On a GPU: the device's record (CUDA events, both sides), floored by the checker's
        own clock; elsewhere: the checker's round trips net of the no-op's."""
        noop = baselines.noop_ms
        wall = series.wall.net_of(noop)
        eager_wall = max(baselines.eager_ms - noop, 1e-3)
        fields: dict[str, Any] = {
            "kernel_wall_ms": wall.median_ms, "eager_wall_ms": eager_wall, "timed_draws": series.wall.samples,
            "harness_overhead_ms": noop, "kernel_roundtrip_ms": series.wall.median_ms,
            "baseline_source": baselines.source, "baseline_drift": baselines.drift}
        device = series.device
        if device is not None and baselines.eager_device_ms is not None:
            floor = WALL_BOUND_RATIO * wall.median_ms
            if device.median_ms < floor:
                self.log.note("timing_floor", f"the device record ({device.median_ms:.4g} ms) is under "
                              f"{WALL_BOUND_RATIO:.0%} of the checker's own net round trip per draw "
                              f"({wall.median_ms:.4g} ms): the floor counts")
            if len(series.by_position) > 1:
                self.log.note("trip_positions", "device ms per call by its place in the round trip (median): "
                              + ", ".join(f"{ms:.4g}" for ms in series.by_position))
            fields.update(kernel_ms=max(device.median_ms, floor), kernel_min_ms=device.min_ms,
                          eager_ms=baselines.eager_device_ms, torch_compile_ms=baselines.torch_compile_device_ms,
                          timing_method=device.method, late_draws=series.late_draws, timing_resolved=True)
            return fields
        compiled = baselines.torch_compile_ms
        fields.update(kernel_ms=wall.median_ms, kernel_min_ms=wall.min_ms, eager_ms=eager_wall,
                      torch_compile_ms=max(compiled - noop, 1e-3) if compiled is not None else None,
                      timing_method=series.wall.method,
                      timing_resolved=timing_resolved(series.wall.median_ms, noop))
        return fields

    def baselines(self) -> Baselines:
        request, options, problem = self.request, self.request.options, self.problem
        overrides = problem.overrides
        first = self.expected(self.draw(0))
        key = cache_key(problem.problem_hash, problem.shapes, options.warmup, options.timed,
                        bool(options.compile_baseline), self.on_gpu, self.per_trip, options.flush_l2)
        cache_dir = Path(request.baseline_cache_dir) if request.baseline_cache_dir else None
        writable = tuple(p for p in (request.ptx_cache_dir,) if p)
        return cached_or_measured(cache_dir, key, lambda: measure(
            Path(request.problem_path), overrides, self.draw, self.returned_outputs(first), problem.mutates,
            self.on_gpu, options.warmup, options.timed, bool(options.compile_baseline), writable, self.per_trip,
            options.flush_l2, alone=self.lock.exclusive, idle=self.lock.released, forked=self.spare.take()))


class _Laps:
    """Seconds between successive marks, recorded under the phase names."""

    def __init__(self, started: float) -> None:
        self.last = started

    def mark(self, phases: dict[str, float], name: str) -> None:
        now = time.perf_counter()
        phases[name] = now - self.last
        self.last = now


def _device_name(on_gpu: bool) -> str:
    from .baselines import device_fingerprint

    return device_fingerprint(on_gpu)["device"]


def _base_fields(request: JudgeRequest, source: str) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION, "problem_id": request.problem_id, "dsl": request.dsl,
        "device": request.device, "preset": request.preset, "seed": request.seed, "protocol": request.options.protocol,
        "source_hash": hashlib.sha256(source.encode()).hexdigest(), "compiled": False, "executed": False,
        "correct": None, "tier": "fail", "kernel_ms": None, "eager_ms": None, "torch_compile_ms": None,
        "speedup": None, "rejected_by": None, "reason": "", "timing_method": None, "target": None,
        "device_name": None, "problem_hash": None, "compile_s": 0.0, "launches_per_call": None,
    }


def run(request: JudgeRequest, process: KernelProcess, spare: Optional[ForkedSpare] = None) -> dict[str, Any]:
    """Judge one kernel with `process` (a fresh, warm kernel process); always returns a verdict dict. With a
    device lock (several judgements on one GPU), the judgement holds the GPU shared and times alone. `spare`: a
    process forked ahead for the baselines (CPU pools), discarded here if they did not need it."""
    lock = DeviceLock(request.device_lock if request.device == "cuda" else None)
    spare = spare or ForkedSpare()
    try:
        with lock.shared():
            fields = _judge(request, process, lock, spare)
    finally:
        spare.discard()
    if lock.path is not None:
        fields.setdefault("phases_s", {})["device_lock_wait"] = lock.waited_s
    return fields


def _judge(request: JudgeRequest, process: KernelProcess, lock: DeviceLock, spare: ForkedSpare) -> dict[str, Any]:
    started = time.perf_counter()
    lap = _Laps(started)
    source = Path(request.kernel_path).read_text(errors="replace")
    log = CheckLog()
    fields = _base_fields(request, source)
    judge: Optional[Judge] = None
    try:
        violations = [] if request.options.skip_static_checks else check_source(source, request.dsl)
        log.check("static", not violations, "; ".join(v.describe() for v in violations) or "source rules hold")
        judge = Judge(request, log, process, lock, spare)
        # The checker waited for the kernel process's start before taking this request (checker/__main__);
        # this returns at once, or raises the start's failure as the verdict's reason.
        process.wait_ready(READY_TIMEOUT_S)
        fields.update(problem_hash=judge.problem.problem_hash, device_name=_device_name(judge.on_gpu),
                      shapes=judge.problem.shapes, preset=judge.problem.preset)
        inputs = judge.draw(request.seed)
        expected = judge.expected(inputs)
        judge.start(inputs, expected)
        lap.mark(judge.phases_s, "setup")
        with lock.released():  # mostly the candidate's compile: other judgements may time meanwhile
            produced, first = judge.call(inputs)
        lap.mark(judge.phases_s, "first_call")
        fields["launches_per_call"] = _as_int(first.get("launches"))
        if first.get("stub_launches"):
            compiles = _compile_records(process.request({"op": "compiles"}, CALL_TIMEOUT_S).get("compiles"))
            fields["compiles"] = compiles
            ptx = sum(int(c.get("ptx_bytes", 0)) for c in compiles)
            fields["target"] = compiles[0].get("target") if compiles else None
            log.note("compile", f"{len(compiles)} kernel(s) compiled to PTX ({ptx} bytes)")
            fields.update(tier="compile_only", compiled=bool(compiles), reason=(
                f"compile-only: no GPU here; {len(compiles)} {request.dsl} kernel(s) compiled to "
                f"{fields['target']} PTX ({ptx} bytes), not executed, so correctness and speed are unknown"))
            return _finish(fields, log, judge, started)
        fields["executed"] = True
        outcome = compare(produced, expected, judge.problem.tolerance)
        log.check("correctness", outcome.passed, f"draw seed={request.seed}: {outcome.detail}")
        options = request.options
        details = [judge.correctness(request.seed + i + 1, outlier=False)
                   for i in range(max(options.correctness_draws - 1, 0))]
        if judge.problem.outlier_inputs:
            details += [judge.correctness(request.seed + 100 + i, outlier=True) for i in range(options.outlier_draws)]
        fields["correct"] = True
        lap.mark(judge.phases_s, "correctness")
        judge.knockout(request.seed + 500)
        judge.decoration(request.seed + 600, calls=PROFILED_CALLS_BEFORE_TIMING)
        lap.mark(judge.phases_s, "integrity")
        fields.update(judge.timing())
        overhead = fields["harness_overhead_ms"]
        if fields["timing_resolved"]:
            fields["speedup"] = fields["eager_ms"] / fields["kernel_ms"]
            fields["tier"] = "pass2x" if fields["speedup"] >= 2.0 else "pass"
            how = ("device time, CUDA events" if fields["timing_method"].startswith("cuda_events")
                   else f"net of the harness's {overhead:.3g} ms round trip")
            speed = (f"{fields['speedup']:.2f}x eager ({fields['kernel_ms']:.4g} ms vs {fields['eager_ms']:.4g} ms, "
                     f"{how})")
        else:
            fields["speedup"], fields["tier"] = None, "pass"
            speed = (f"speed not resolved: the kernel's round trip ({fields['kernel_roundtrip_ms']:.4g} ms) is within "
                     f"{TIMING_RESOLUTION:.0%} of the harness's own ({overhead:.4g} ms), so no speedup is claimed "
                     f"(eager {fields['eager_ms']:.4g} ms)")
        fields["reason"] = (f"correct on {len(details) + 1} draws; {speed}"
                            + ("" if judge.dsl_outputs_only else "; some outputs computed by eager code (dsl_output)"))
    except Rejected as rejected:
        if not log.checks or log.checks[-1]["passed"]:  # raised by the kernel process or the session, not a check
            log.checks.append({"name": rejected.check, "passed": False, "detail": rejected.reason[:4000]})
        fields.update(rejected_by=rejected.check, reason=rejected.reason[:4000], tier="fail")
        if rejected.check in ("correctness", "post_timing"):
            fields["correct"] = False
    except Exception as err:  # the checker's own failure (e.g. a broken problem): reported, never hidden
        fields.update(rejected_by="judge_error", reason=f"judge error: {type(err).__name__}: {err}"[:4000])
    return _finish(fields, log, judge, started)


def _finish(fields: dict[str, Any], log: CheckLog, judge: Optional[Judge], started: float) -> dict[str, Any]:
    if judge is not None:
        fields["phases_s"] = {**judge.phases_s, "useful": judge.useful_s}
        fields["dsl_outputs_only"] = judge.dsl_outputs_only if fields["correct"] else None
        if judge.work.calls:
            fields["work_evidence"] = judge.work.as_evidence()
            fields["dsl_share"] = fields["work_evidence"]["dsl_share"]
        if judge.wall_splits.dsl_us:
            fields.setdefault("work_evidence", {})["wall_split"] = judge.wall_splits.as_evidence()
        if judge.twins.pairs:
            fields.setdefault("work_evidence", {})["profiled_twins"] = judge.twins.as_evidence()
        if fields.get("tier") != "compile_only" and judge.session is not None:
            try:  # taken before the kernel process ended, when the judgement reached timing
                info = (judge.final_compiles if judge.final_compiles is not None
                        else judge.process.request({"op": "compiles"}, 30.0))
            except Rejected:
                info = {}
            compiles = _compile_records(info.get("compiles"))
            fields["compiles"] = compiles
            fields["compiled"] = bool(compiles) and not info.get("compile_error")
            fields["compile_s"] = float(sum(float(c.get("seconds", 0.0)) for c in compiles))
            fields["target"] = compiles[0].get("target") if compiles else None
            fields["phases_s"]["useful"] = judge.useful_s + fields["compile_s"]
    fields["checks"] = log.checks
    fields["worker_s"] = time.perf_counter() - started
    return fields


def _as_int(value: Any) -> Optional[int]:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _compile_records(raw: Any) -> list[dict[str, Any]]:
    """The kernel process's compile records, reduced to well-typed fields: they are its own account (they
    inform the verdict, never decide it), and a malformed one is dropped rather than trusted."""
    records = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        try:
            records.append({"dsl": str(item["dsl"])[:20], "target": str(item["target"])[:40],
                            "seconds": float(item["seconds"]), "ptx_bytes": int(item.get("ptx_bytes", 0)),
                            "executes": bool(item.get("executes", True)),
                            "kernels": [str(name)[:200] for name in item.get("kernels") or []][:64]})
        except (KeyError, TypeError, ValueError):
            continue
    return records[:64]
