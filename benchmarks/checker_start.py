"""What one warm checker costs to start, by the DSLs its kernel process imports: both (a pool that serves any
submission, the default) against one (a pool for one DSL, as `mkb problems validate` keeps per shard).

A start is a checker process (torch and the pipeline imported) plus its sandboxed kernel process (torch, the DSL
modules, one throw-away profile); it is warm when it says so on its warm pipe (`CheckerProcess.warm`). Starts run
one after another, alternating the configurations round by round, so that drift on the machine falls on all of
them alike. Printed per configuration: median wall seconds to warm, and CPU seconds per start as the whole
machine's busy time over the configuration's starts (/proc/stat: run this on an otherwise idle machine; the
numbers include bubblewrap and the parent's share). Then the ratios one-DSL / both.

    python benchmarks/checker_start.py --starts 5 [--device cpu] [--out FILE]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mkb_ray.judge.process import CheckerProcess  # noqa: E402

CONFIGS = {"both": ("cutedsl", "tirx"), "tirx": ("tirx",), "cutedsl": ("cutedsl",)}
CLOCK_TICKS = 100  # USER_HZ: /proc/stat counts in 1/100 s on Linux


def busy_ticks() -> int:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system = (int(x) for x in fields[:3])
    return user + nice + system


def one_start(device: str, dsls: tuple[str, ...]) -> tuple[float, float]:
    ticks, started = busy_ticks(), time.perf_counter()
    checker = CheckerProcess(device, dsls=dsls)
    try:
        if not checker.warm(300):
            raise SystemExit(f"a checker for {dsls} did not warm up in 300 s")
        wall = time.perf_counter() - started
    finally:
        checker.close()
    return wall, (busy_ticks() - ticks) / CLOCK_TICKS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=5, help="starts per configuration (default 5)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    args = parser.parse_args()
    one_start(args.device, CONFIGS["both"])  # page cache and bytecode warm for every configuration alike
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in CONFIGS}
    for round_number in range(args.starts):
        for name, dsls in CONFIGS.items():
            samples[name].append(one_start(args.device, dsls))
        print(f"round {round_number + 1}/{args.starts} done", file=sys.stderr, flush=True)
    lines = [f"checker start to warm, device={args.device}, {args.starts} starts per configuration",
             f"{'kernel process imports':<24}{'wall s (median)':>16}{'CPU s / start':>15}"]
    summary = {}
    for name, values in samples.items():
        wall = statistics.median(w for w, _ in values)
        cpu = sum(c for _, c in values) / len(values)
        summary[name] = (wall, cpu)
        lines.append(f"{name + ' (' + ','.join(CONFIGS[name]) + ')':<24}{wall:>16.2f}{cpu:>15.2f}")
    for name in ("tirx", "cutedsl"):
        lines.append(f"ratio {name} / both: wall {summary[name][0] / summary['both'][0]:.2f}, "
                     f"CPU {summary[name][1] / summary['both'][1]:.2f}")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
