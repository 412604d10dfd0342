"""Write the analysis's 'faster' margins (analysis/noise_margins.json) from measured repeat judgements.

For every measured kernel (one problem's solution in one DSL, judged `--runs` times with fresh seeds) the input
gives its median judged kernel time and the pair-p95 of its speedup: the 95th percentile of |s_i / s_j - 1| over
pairs of judgements, i.e. how much faster one judgement of that very kernel can look than another. Kernels are
grouped into classes of judged time per target (`--gpu-bounds-ms`, `--cpu-bounds-ms`); a class's margin is the
75th percentile of its kernels' pair-p95 (three in four kernels of the class stay within the margin 95 % of the
time). Prints the table and the kernels behind each class; writes `--out` (default: the file the analysis reads).

Inputs (any mix, each recorded under benchmarks/results/):
  --fidelity-table FILE SECTION   the table benchmarks/timing_fidelity.py printed, from the section whose header
                                  line contains SECTION (target gpu)
  --fidelity-summary summary.json timing_fidelity.py's --out summary (target gpu)
  --noise-json FILE...            benchmarks/timing_noise.py --json outputs (target from the file's device)

    python3 benchmarks/noise_margins.py \\
      --fidelity-table benchmarks/results/2026-12-04-h200-session17-launch-lead.txt \\
        "Timing fidelity with the launch lead" --wall-floor 0.1 \\
      --noise-json benchmarks/results/2026-12-04-cpu-timing-noise-*.json
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(HERE)]  # the analysis's reader; timing_noise's quantile

from analysis.noise_margins import (RECORDED, MarginClass, NoiseMargins, TargetMargins,  # noqa: E402
                                    parse_noise_margins)
from timing_noise import quantile  # noqa: E402

CLASS_QUANTILE = 0.75
STATISTIC = ("per class of judged kernel time: the 75th percentile (linear) of the kernels' speedup pair-p95 over "
             "repeat judgements (benchmarks/noise_margins.py)")


@dataclass(frozen=True)
class Measured:
    target: str  # "gpu" or "cpu", as the analysis's cells name targets
    kernel: str  # problem and DSL
    kernel_ms: float  # median judged kernel time
    pair_p95: float  # of the speedup over repeat judgements
    source: str


def source_label(name: str, section: str, wall_floor: float | None) -> str:
    """How the recorded JSON names a fidelity table (tests re-derive the margins from it)."""
    label = f"{name} ({section})"
    return label + (f" [rows at the {wall_floor:g} wall floor left out]" if wall_floor else "")


def from_fidelity_table(path: Path, section: str, wall_floor: float | None = None) -> list[Measured]:
    """Rows of the table under the first header line containing `section`, up to the next '## ' header.
    `wall_floor`: leave out rows whose judged kernel time equals that share of the checker's own net wall per draw
    (the judge raised them to its floor, so their spread is the wall clock's: run of 2026-12-04, session 17)."""
    rows, inside, in_header = [], False, False
    for line in path.read_text().splitlines():
        if line.startswith("## "):  # a header may run over several '## ' lines
            if not in_header:
                if inside:
                    break
                inside = section in line
            in_header = True
            continue
        in_header = False
        fields = line.split()
        if not inside or len(fields) < 15 or "/" not in fields[0] or fields[1] not in ("tirx", "cutedsl"):
            continue
        try:
            # Both table layouts (with and without the `events` columns): the judge's pair-p95 is the first
            # percentage, the checker's own net wall per draw the field after the goal's yes/NO.
            first_pct = next(i for i, f in enumerate(fields) if f.endswith("%"))
            goal = next(i for i in range(first_pct, len(fields)) if fields[i] in ("yes", "NO"))
            kernel_ms, p95 = float(fields[2]), float(fields[first_pct].rstrip("%")) / 100
            wall_ms = float(fields[goal + 1])
        except (ValueError, StopIteration) as err:
            raise SystemExit(f"{path}: a row of section {section!r} does not parse ({err!r}): {line}") from err
        if wall_floor and abs(kernel_ms - wall_floor * wall_ms) <= 0.005 * kernel_ms:
            continue  # its judged time is the wall floor's, not the device's: it measured the checker's clock
        rows.append(Measured("gpu", f"{fields[0]} {fields[1]}", kernel_ms, p95, source_label(path.name, section,
                                                                                             wall_floor)))
    if not rows:
        raise SystemExit(f"{path}: no table rows under a '## ' header containing {section!r}")
    return rows


def from_fidelity_summary(path: Path) -> list[Measured]:
    return [Measured("gpu", f"{s['problem_id']} {s['dsl']}", float(s["kernel_ms"]), float(s["pair_p95"]), path.name)
            for s in json.loads(path.read_text()) if s.get("kernel_ms") and s.get("pair_p95") is not None]


def from_noise_json(path: Path) -> list[Measured]:
    data = json.loads(path.read_text())
    config = data["config"]
    target = "gpu" if config["device"] == "cuda" else "cpu"
    out = []
    for per_trip, body in sorted(data["by_draws_per_trip"].items()):
        summary = body.get("summary")
        if summary and summary["speedup"]["pairwise_p95"] is not None:
            out.append(Measured(target, f"{config['problem_id']} {config['dsl']} ({per_trip}/trip)",
                                float(summary["kernel_ms"]["median"]), float(summary["speedup"]["pairwise_p95"]),
                                path.name))
    return out


def classes_of(measured: Sequence[Measured], bounds_ms: Sequence[float]) -> tuple[MarginClass, ...]:
    """One class per bound interval that holds measured kernels; an empty interval joins the class below it (or,
    for the first, the next class up), so every time still has a class."""
    edges = [0.0, *sorted(bounds_ms)]
    groups: list[tuple[float, list[Measured]]] = []
    for index, low in enumerate(edges):
        high = edges[index + 1] if index + 1 < len(edges) else float("inf")
        members = [m for m in measured if low <= m.kernel_ms < high]
        if members:  # an empty interval: the class below extends over it
            groups.append((low, members))
    if not groups:
        raise SystemExit("no measured kernels")
    groups[0] = (0.0, groups[0][1])
    return tuple(MarginClass(low, round(quantile([m.pair_p95 for m in members], CLASS_QUANTILE), 3), len(members))
                 for low, members in groups)


def build(measured: Iterable[Measured], bounds: dict[str, Sequence[float]]) -> NoiseMargins:
    by_target: dict[str, list[Measured]] = {}
    for m in measured:
        by_target.setdefault(m.target, []).append(m)
    targets = {}
    for target, members in sorted(by_target.items()):
        sources = sorted({m.source for m in members})
        targets[target] = TargetMargins(classes_of(members, bounds.get(target, ())),
                                        "benchmarks/results/: " + ", ".join(sources))
    return NoiseMargins(targets, STATISTIC)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fidelity-table", nargs=2, action="append", default=[], metavar=("FILE", "SECTION"))
    parser.add_argument("--fidelity-summary", type=Path, action="append", default=[])
    parser.add_argument("--wall-floor", type=float, default=None, metavar="RATIO",
                        help="leave out fidelity-table rows whose judged time is RATIO x their wall k_ms (the judge's "
                             "floor then decided their time, not the device)")
    parser.add_argument("--noise-json", type=Path, nargs="*", default=[])
    parser.add_argument("--gpu-bounds-ms", type=float, nargs="*", default=[0.05],
                        help="class bounds for the GPU target (default: 0.05, i.e. below and above 50 µs)")
    parser.add_argument("--cpu-bounds-ms", type=float, nargs="*", default=[0.5],
                        help="class bounds for the CPU target (default: 0.5 ms)")
    parser.add_argument("--out", type=Path, default=RECORDED, help=f"where to write (default {RECORDED})")
    args = parser.parse_args()
    measured: list[Measured] = []
    for path, section in args.fidelity_table:
        measured += from_fidelity_table(Path(path), section, args.wall_floor)
    for path in args.fidelity_summary:
        measured += from_fidelity_summary(path)
    for path in args.noise_json:
        measured += from_noise_json(path)
    if not measured:
        parser.error("give at least one input (--fidelity-table, --fidelity-summary or --noise-json)")
    margins = build(measured, {"gpu": args.gpu_bounds_ms, "cpu": args.cpu_bounds_ms})
    parse_noise_margins(margins.as_json(), str(args.out))  # what the analysis will accept
    for target, body in margins.targets.items():
        print(f"{target}: {body.source}")
        uppers = [c.min_ms for c in body.classes[1:]] + [float("inf")]
        for one, upper in zip(body.classes, uppers):
            members = sorted((m for m in measured if m.target == target and one.min_ms <= m.kernel_ms < upper),
                             key=lambda m: m.pair_p95)
            print(f"  kernels {one.min_ms:g}-{upper:g} ms: margin {one.margin:.3f} over {one.kernels} kernels "
                  f"(pair-p95 {', '.join(f'{m.pair_p95:.2f}' for m in members)})")
    args.out.write_text(json.dumps(margins.as_json(), indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
