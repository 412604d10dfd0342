"""Probe: where does the judge's device time exceed in-process CUDA-event timing of the same kernel?

benchmarks/timing_fidelity.py found the judge's CUDA events (made in the kernel process) 1.1-1.9x the in-process
events, also for a device-bound 0.46 ms kernel. This times one solution in-process under variants that each add
one thing the judge's kernel process does differently, so the variant that moves the number names the cause:

- reference:       the method itself (L2 flush, events around the call, device-wide wait), fixed inputs;
- idle_1ms/5ms:    the host sleeps before each call (the judge's calls come after pipe round trips and checks);
- fresh_copy:      a new draw copied into the input buffers before each call (the checker writes every draw);
- exchange:        the inputs living in one dedicated cudaMalloc buffer, as views (the exchange's layout);
- packed_256:      the same, every tensor at a 256-byte offset (run while the exchange aligned large tensors to
                   2 MiB: it made no difference, and that alignment was dropped);
- clock_idle1ms:   the judge's own draw clock (flush, events) with 1 ms of host sleep before each call;
- banks5:          five input sets used in turn (the judge's banks);
- spin_1ms, sleep5_spin1: the host busy for 1 ms before each call (after 5 ms of sleep in the second): does a
                   spinning wait (instead of a blocking pipe read) keep calls as fast as back to back?
- pipe_wait, pipe_spin: a 1 ms round trip to another process before each call, waited for blocked in read() (as
                   the kernel process waits for the checker) or by polling the pipe;
- trip5:           5 ms of host sleep before every fifth call only (a judge's trip: a pipe wait, then 5 draws);
- idle5_mm1/mm3:   5 ms of sleep, then ~1 or ~3 ms of compute-bound device work (bf16 matmuls, not waited for)
                   before the flush: does warm work bring the idle device back to back-to-back speed?
- idle5_flush8:    the same with 8 extra L2 flushes (memory-bound work) instead of matmuls;
- nap5, nap1:      5 or 1 ms of host time during which the device is kept busy with tiny one-thread spin kernels
                   (torch.cuda._sleep, one in flight at a time: busy to the clock governor, nearly no power), then
                   the flush: does a busy-but-idle device stay at back-to-back speed where warm work did not?
- idle5_nap1:      5 ms of sleep, then 1 ms of naps (a keep-alive started only when the request arrives);
- gate_ref, gate_idle5: as reference / idle_5ms, but a ~0.1 ms spin kernel is queued after the flush and before
                   `start` (not waited for): the host launches the call while the device is still busy, so host
                   launch latency drops out of the span. If gate_idle5 ~ gate_ref, the idle penalty is host-side;
- dev_ref, dev_idle5: the device's own kernel records (torch.profiler, CUDA activity) per call: summed kernel time
                   and first-kernel-start to last-kernel-end, beside the event span. Device time that grows after a
                   pause is the device (clocks, TLBs); a span that grows while they do not is the host's launch path;
- gate2m_ref, gate2m_idle5: the same with a ~1 ms gate (CuTe DSL's launch path outlasts a 0.1 ms one after a pause);
- pipe_nap:        pipe_wait's 1 ms round trip, the caller polling the pipe while it keeps naps in flight (a kernel
                   process that keeps the device busy while it waits for the checker);
- sleep5_thread_nap: 5 ms of host sleep in the calling thread while another thread keeps naps in flight on its own
                   stream, parked (and its last nap waited for) before the flush: can a keep-alive thread stand in
                   for the calling thread's own activity?
- guards:          the kernel process's between-call checks (threads, /proc scan for processes) before each call;
- exchange_ipc:    the inputs in a buffer another process allocated and shared through CUDA IPC, as the checker
                   shares the exchange with the kernel process (`exchange` allocates in the same process);
- contexts6, ctx6_idle1ms: six other processes holding idle CUDA contexts, as on a judging host;
- monitored:       the solution imported after the launch monitor is installed (every launch goes through it);
- tpos_fixed, tpos_banks, tpos_exch, tpos_copyout, tpos_gap2ms: the judge's trips (a pause, then 5 calls with the
                   flush and the launch lead), medians by place in the trip: one input set; a set per place; a set
                   per place each in its own exchange buffer; outputs copied into slots of their own after each call,
                   as the kernel process does; 2 ms of host time between calls (`trip_positions`). 2026-12-05, H200:
                   the first three flat for mlp_norm/01 CuTe DSL, kv_cache/01 and moe/01 TIRx;
- after_profiler:  once torch.profiler (CPU + CUDA activities, as the decoration check runs it) has profiled a call
                   in the process (the judge's kernel processes warm the profiler up at start and profile calls).

    python3 scripts/probes/timing_gap.py mlp_norm/01_fused_add_rmsnorm tirx [more problem dsl pairs...]
Prints one line per (problem, dsl, variant): median and min over 50 timed calls after 10 warm-up, 3 repeats.
"""
from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mkb_ray.checker.problem_loader import load_problem  # noqa: E402
from mkb_ray.kernel_runner.draw_clock import DrawClock  # noqa: E402
from mkb_ray.kernel_runner.exchange import (ExchangeBuffer, TensorSlot, dtype_name, open_exchange,  # noqa: E402
                                            plan_slots, view)
from mkb_ray.kernel_runner.guards import ProcessGuard, ThreadGuard  # noqa: E402
from mkb_ray.problems import load_problems  # noqa: E402

FLUSH = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")
START, END = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def timed(fn, inputs_for, before=lambda index: None, calls=60, warmup=10, lead_cycles=0,
          after=lambda index, result: None) -> list[float]:
    """`lead_cycles`: a spin kernel queued between the flush's wait and `start` (see gate_* in the docstring);
    `after(index, result)`: off the clock, once the call's `end` was waited for."""
    samples = []
    for index in range(calls):
        before(index)
        inputs = inputs_for(index)
        FLUSH.zero_()
        torch.cuda.synchronize()
        if lead_cycles:
            torch.cuda._sleep(lead_cycles)
        START.record()
        result = fn(*inputs)
        END.record()
        torch.cuda.synchronize()
        after(index, result)
        del result  # freed before the next call, as when the result was never kept (the allocator reuses it)
        if index >= warmup:
            samples.append(START.elapsed_time(END))
    return samples


FLUSH_MARK = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")


def device_record(fn, inputs, before, calls=60, warmup=10) -> tuple[list[float], list[float], list[float]]:
    """Event span, summed kernel time and first-start-to-last-end per call, from one profiled loop. The flush is
    a bitwise_not (a kernel name no solution launches), so the profiler's kernels split into calls at it."""
    spans = []
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for index in range(calls):
            before(index)
            torch.bitwise_not(FLUSH_MARK, out=FLUSH_MARK)
            torch.cuda.synchronize()
            START.record()
            fn(*inputs)
            END.record()
            torch.cuda.synchronize()
            spans.append(START.elapsed_time(END))
    kernels = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                     if "CUDA" in str(getattr(e, "device_type", "")) and "Memcpy" not in e.name
                     and "Memset" not in e.name)
    per_call: list[list[tuple[float, float]]] = []
    for start, end, name in kernels:
        if "bitwise_not" in name:
            per_call.append([])
        elif per_call:
            per_call[-1].append((start, end))
    busy = [sum(e - s for s, e in call) / 1e3 for call in per_call]
    extent = [(max(e for _, e in call) - min(s for s, _ in call)) / 1e3 if call else 0.0 for call in per_call]
    return spans[warmup:], busy[warmup:], extent[warmup:]


class NapThread:
    """Keeps one tiny spin kernel in flight on its own stream while `running`; `park()` stops it and waits."""

    def __init__(self) -> None:
        import threading
        self.running, self.parked, self.alive = threading.Event(), threading.Event(), True
        self.parked.set()
        self.stream = torch.cuda.Stream()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        done = torch.cuda.Event()
        while self.alive:
            if not self.running.wait(0.01):
                continue
            self.parked.clear()
            with torch.cuda.stream(self.stream):
                while self.running.is_set():
                    torch.cuda._sleep(20_000)
                    done.record(self.stream)
                    done.synchronize()
            self.parked.set()

    def run(self) -> None:
        self.running.set()

    def park(self) -> None:
        self.running.clear()
        self.parked.wait()

    def close(self) -> None:
        self.alive = False
        self.running.clear()
        self.thread.join()


def _spin(seconds: float) -> None:
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass


def _idle_contexts(count: int) -> list:
    """Processes that each hold a CUDA context (and a little memory) and then sleep."""
    code = ("import time, torch; x = torch.zeros(1 << 20, device='cuda'); torch.cuda.synchronize(); "
            "print(1, flush=True); time.sleep(600)")
    processes = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE) for _ in range(count)]
    for process in processes:
        process.stdout.readline()
    return processes


class PipePeer:
    """Another process that answers each byte after 1 ms of work (a checker writing the next draw): the caller
    waits for the answer blocked in read(), as the kernel process waits for the checker, or polling (spinning)."""

    CODE = ("import os, time\n"
            "while os.read(0, 1):\n"
            "    deadline = time.perf_counter() + 0.001\n"
            "    while time.perf_counter() < deadline: pass\n"
            "    os.write(1, b'x')\n")

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", self.CODE], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, bufsize=0)

    def wait(self, spin: bool, nap: bool = False) -> None:
        out = self.process.stdout.fileno()
        os.set_blocking(out, not spin)
        self.process.stdin.write(b"x")
        done = torch.cuda.Event()
        while True:
            if nap and done.query():
                torch.cuda._sleep(20_000)
                done.record()
            try:
                if os.read(out, 1):
                    return
            except BlockingIOError:
                continue

    def close(self) -> None:
        self.process.kill()


class PeerBuffer:
    """An exchange buffer allocated by another process and opened here through CUDA IPC (the judge's layout)."""

    CODE = ("import json, sys, time\n"
            "from pathlib import Path\n"
            "from mkb_ray.kernel_runner.exchange import ExchangeBuffer\n"
            "buffer = ExchangeBuffer(int(sys.argv[1]), 'cuda', Path('.'))\n"
            "print(json.dumps(buffer.description), flush=True)\n"
            "time.sleep(600)\n")

    def __init__(self, nbytes: int, exchange_dir: Path) -> None:
        root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.process = subprocess.Popen([sys.executable, "-c", self.CODE, str(nbytes)], stdout=subprocess.PIPE,
                                        env=env, text=True)
        description = json.loads(self.process.stdout.readline())
        self.tensor = open_exchange(description, exchange_dir)

    def close(self) -> None:
        self.process.kill()


def import_solution(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def draws(loaded, count: int) -> list[list]:
    out = []
    for seed in range(count):
        torch.manual_seed(100 + seed)
        with torch.device("cuda"):
            out.append(list(loaded.module.make_inputs()))
    return out


def report(problem_id: str, dsl: str, variant: str, runs: list[list[float]]) -> None:
    medians = [statistics.median(r) for r in runs]
    print(f"{problem_id:44} {dsl:8} {variant:12} median {statistics.median(medians):.4f} ms "
          f"(runs {', '.join(f'{m:.4f}' for m in medians)}; min {min(min(r) for r in runs):.4f})", flush=True)


def probe(problem_id: str, dsl: str, exchange_dir: Path, only: set[str] | None = None) -> None:
    problem = load_problems().get(problem_id)
    loaded = load_problem(problem.path, problem_id, "production")
    solution = import_solution(problem.solutions[dsl], f"plain_{dsl}_{abs(hash(problem_id))}")
    sets = draws(loaded, 6)
    fixed = sets[0]
    variants = {
        "reference": (lambda i: fixed, lambda i: None),
        "idle_1ms": (lambda i: fixed, lambda i: time.sleep(0.001)),
        "idle_5ms": (lambda i: fixed, lambda i: time.sleep(0.005)),
        "fresh_copy": (lambda i: fixed, lambda i: [t.copy_(s) for t, s in zip(fixed, sets[1 + i % 5])
                                                   if isinstance(t, torch.Tensor)]),
        "banks5": (lambda i: sets[1 + i % 5], lambda i: None),
        "spin_1ms": (lambda i: fixed, lambda i: _spin(0.001)),
        "sleep5_spin1": (lambda i: fixed, lambda i: (time.sleep(0.005), _spin(0.001))),
    }
    warm_a = torch.randn(4096, 4096, dtype=torch.bfloat16, device="cuda")
    warm_b = torch.randn(4096, 4096, dtype=torch.bfloat16, device="cuda")

    def busy(matmuls: int) -> None:  # ~0.2-0.3 ms each on an H200 at full clock
        for _ in range(matmuls):
            torch.mm(warm_a, warm_b)

    def flushes(count: int) -> None:
        for _ in range(count):
            FLUSH.zero_()

    def nap(seconds: float) -> None:  # the device busy with one tiny spin kernel at a time, for `seconds`
        done = torch.cuda.Event()
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            torch.cuda._sleep(20_000)  # ~10 µs at full clock, ~60 µs at the idle clock
            done.record()
            while not done.query() and time.perf_counter() < deadline:
                pass

    variants["nap5"] = (lambda i: fixed, lambda i: nap(0.005))
    variants["nap1"] = (lambda i: fixed, lambda i: nap(0.001))
    variants["idle5_nap1"] = (lambda i: fixed, lambda i: (time.sleep(0.005), nap(0.001)))
    for name, before in (("ref", lambda i: None), ("idle5", lambda i: time.sleep(0.005))):
        for gate, cycles in (("gate", 200_000), ("gate2m", 2_000_000)):
            if only is None or f"{gate}_{name}" in only:
                report(problem_id, dsl, f"{gate}_{name}",
                       [timed(solution.solve, lambda i: fixed, before, lead_cycles=cycles) for _ in range(3)])
        if only is None or f"dev_{name}" in only:
            records = [device_record(solution.solve, fixed, before) for _ in range(3)]
            for index, label in enumerate(("span", "kbusy", "kextent")):
                report(problem_id, dsl, f"dev_{name}_{label}", [r[index] for r in records])
    if only is None or "sleep5_thread_nap" in only:
        napper = NapThread()

        def sleep_with_naps(index: int) -> None:
            napper.run()
            time.sleep(0.005)
            napper.park()

        try:
            report(problem_id, dsl, "sleep5_thread_nap",
                   [timed(solution.solve, lambda i: fixed, sleep_with_naps) for _ in range(3)])
        finally:
            napper.close()
    trip_positions(problem_id, dsl, solution.solve, sets, exchange_dir, only)
    variants["trip5"] = (lambda i: fixed, lambda i: time.sleep(0.005) if i % 5 == 0 else None)
    variants["idle5_mm1"] = (lambda i: fixed, lambda i: (time.sleep(0.005), busy(4)))
    variants["idle5_mm3"] = (lambda i: fixed, lambda i: (time.sleep(0.005), busy(12)))
    variants["idle5_flush8"] = (lambda i: fixed, lambda i: (time.sleep(0.005), flushes(8)))
    processes, threads = ProcessGuard(), ThreadGuard()
    variants["guards"] = (lambda i: fixed, lambda i: (threads.new_threads(), processes.new_processes()))
    tensors = [x if isinstance(x, torch.Tensor) else None for x in fixed]
    slots, end = plan_slots(tensors)
    peer, shared = PipePeer(), None
    try:
        variants["pipe_wait"] = (lambda i: fixed, lambda i: peer.wait(spin=False))
        variants["pipe_spin"] = (lambda i: fixed, lambda i: peer.wait(spin=True))
        variants["pipe_nap"] = (lambda i: fixed, lambda i: peer.wait(spin=True, nap=True))
        if only is None or "exchange_ipc" in only:
            shared = PeerBuffer(end, exchange_dir)
            homed_ipc = [view(shared.tensor, s).copy_(x) if s is not None else x for s, x in zip(slots, fixed)]
            variants["exchange_ipc"] = (lambda i: homed_ipc, lambda i: None)
        for name, (inputs_for, before) in variants.items():
            if only is None or name in only:
                report(problem_id, dsl, name, [timed(solution.solve, inputs_for, before) for _ in range(3)])
    finally:
        peer.close()
        if shared is not None:
            torch.cuda.synchronize()
            shared.close()
    if only is not None:
        return
    idle = _idle_contexts(6)  # as many other CUDA contexts as a judging host holds (checkers, kernel processes)
    try:
        report(problem_id, dsl, "contexts6", [timed(solution.solve, lambda i: fixed) for _ in range(3)])
        report(problem_id, dsl, "ctx6_idle1ms",
               [timed(solution.solve, lambda i: fixed, lambda i: time.sleep(0.001)) for _ in range(3)])
    finally:
        for process in idle:
            process.kill()
    exchange = ExchangeBuffer(end, "cuda", exchange_dir)
    homed = [view(exchange.tensor, s).copy_(x) if s is not None else x for s, x in zip(slots, fixed)]
    report(problem_id, dsl, "exchange", [timed(solution.solve, lambda i: homed) for _ in range(3)])
    packed, offset = [], 0  # every tensor at a 256-byte offset, as the exchange packed them before 2026-12-04
    for x in fixed:
        if isinstance(x, torch.Tensor):
            offset = (offset + 255) // 256 * 256
            packed.append(TensorSlot(dtype_name(x.dtype), tuple(x.shape), offset))
            offset += max(packed[-1].nbytes, 1)
        else:
            packed.append(None)
    tight = ExchangeBuffer(offset, "cuda", exchange_dir)
    homed = [view(tight.tensor, s).copy_(x) if s is not None else x for s, x in zip(packed, fixed)]
    report(problem_id, dsl, "packed_256", [timed(solution.solve, lambda i: homed) for _ in range(3)])
    warm = DrawClock(flush_l2=True)
    runs = []
    for _ in range(3):  # the judge's draw clock itself, with a 1 ms sleep before each call (as after a pipe wait)
        samples = []
        for index in range(60):
            time.sleep(0.001)
            warm.prepare()
            _, drawn = warm.run(lambda: solution.solve(*fixed))
            if index >= 10:
                samples.append(drawn.counted_ms)
        runs.append(samples)
    report(problem_id, dsl, "clock_idle1ms", runs)


def trip_positions(problem_id: str, dsl: str, solve, sets: list[list], exchange_dir: Path,
                   only: set[str] | None) -> None:
    """The judge's trips in-process: a 5 ms pause, then 5 calls back to back, each with the judge's flush and launch
    lead; medians by place in the trip. The judge reads calls 4-5 of a trip 10-18 % slower than calls 1-3 for
    mlp_norm/01 and kv_cache/01 (H100 and H200, 2026-12-05). Each case names the inputs of call i, what runs
    before it and what runs after it (off the clock); see the module docstring for the five."""
    from mkb_ray.kernel_runner.draw_clock import LAUNCH_LEAD_CYCLES

    banks = sets[1:6]
    exchanged, buffers = [], []
    if only is None or "tpos_exch" in only:
        for bank in banks:
            tensors = [x if isinstance(x, torch.Tensor) else None for x in bank]
            slots, end = plan_slots(tensors)
            buffers.append(ExchangeBuffer(end, "cuda", exchange_dir))
            exchanged.append([view(buffers[-1].tensor, s).copy_(x) if s is not None else x
                              for s, x in zip(slots, bank)])
    out_slots: list[list[torch.Tensor]] = []

    def copy_out(index: int, result) -> None:  # as the kernel process copies each draw's outputs into its slots
        outputs = result if isinstance(result, (tuple, list)) else (result,)
        if len(out_slots) < 5:
            out_slots.append([torch.empty_like(out) for out in outputs])
        for slot, out in zip(out_slots[index % 5], outputs):
            slot.copy_(out)
        torch.cuda.synchronize()

    pause = lambda i: time.sleep(0.005) if i % 5 == 0 else None  # noqa: E731
    # 2 ms of host time between the calls of a trip too (the kernel process's checks and copies between draws).
    pause_and_gaps = lambda i: time.sleep(0.005 if i % 5 == 0 else 0.002)  # noqa: E731
    nothing = lambda i, result: None  # noqa: E731
    cases = {"tpos_fixed": (lambda i: sets[0], pause, nothing),
             "tpos_banks": (lambda i: banks[i % 5], pause, nothing),
             "tpos_exch": (lambda i: exchanged[i % 5], pause, nothing),
             "tpos_copyout": (lambda i: banks[i % 5], pause, copy_out),
             "tpos_gap2ms": (lambda i: banks[i % 5], pause_and_gaps, nothing)}
    for name, (inputs_for, before, after) in cases.items():
        if only is not None and name not in only:
            continue
        runs = [timed(solve, inputs_for, before, calls=110, lead_cycles=LAUNCH_LEAD_CYCLES, after=after)
                for _ in range(3)]
        _print_places(problem_id, dsl, name, runs)
    torch.cuda.synchronize()
    for buffer in buffers:
        buffer.close()


def _print_places(problem_id: str, dsl: str, name: str, runs: list[list[float]]) -> None:
    """Medians by place in a 5-call trip (the runs' first sample is call 10, place 0)."""
    by_place = [[x for run in runs for j, x in enumerate(run) if (10 + j) % 5 == place] for place in range(5)]
    print(f"{problem_id:44} {dsl:8} {name:12} median by place in trip: "
          + ", ".join(f"{statistics.median(v):.4f}" for v in by_place) + " ms", flush=True)


def main() -> None:
    # VARIANTS=a,b,c: only those of the first group (no exchange, monitor or profiler variants).
    only = set(os.environ["VARIANTS"].split(",")) if os.environ.get("VARIANTS") else None
    pairs = list(zip(sys.argv[1::2], sys.argv[2::2]))
    with tempfile.TemporaryDirectory() as scratch:
        for problem_id, dsl in pairs:
            probe(problem_id, dsl, Path(scratch), only)
        if only is not None:
            return
        # Last: the launch monitor patches the DSLs' entry points for the rest of the process.
        from mkb_ray.kernel_runner.launches import LaunchMonitor

        for dsl in sorted({d for _, d in pairs}):
            LaunchMonitor(has_gpu=True).install(dsl)
        for problem_id, dsl in pairs:
            problem = load_problems().get(problem_id)
            loaded = load_problem(problem.path, problem_id, "production")
            monitored = import_solution(problem.solutions[dsl], f"monitored_{dsl}_{abs(hash(problem_id))}")
            fixed = draws(loaded, 1)[0]
            runs = [timed(monitored.solve, lambda i, fixed=fixed: fixed) for _ in range(3)]
            report(problem_id, dsl, "monitored", runs)
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        for problem_id, dsl in pairs:
            problem = load_problems().get(problem_id)
            loaded = load_problem(problem.path, problem_id, "production")
            again = import_solution(problem.solutions[dsl], f"profiled_{dsl}_{abs(hash(problem_id))}")
            fixed = draws(loaded, 1)[0]
            with torch.profiler.profile(activities=activities):
                again.solve(*fixed)
                torch.cuda.synchronize()
            runs = [timed(again.solve, lambda i, fixed=fixed: fixed) for _ in range(3)]
            report(problem_id, dsl, "after_profiler", runs)


if __name__ == "__main__":
    main()
