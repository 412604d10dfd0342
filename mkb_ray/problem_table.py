"""problems/README.md: the table of every problem, generated from the sidecars and the recorded validations.

Nothing in it is typed by hand. The problem files give the task (docstring), shapes (constants) and input dtypes
(`torch.<dtype>` named in make_inputs); the sidecars give the family and the work (flops, bytes), from which the
H200's speed-of-light time follows; the recorded validations (`mkb problems validate --report FILE` JSON, or the
text a validate run printed, under benchmarks/results/) give the eager time and each solution's speedup. A record
whose problem hash differs from the file's (JSON records carry it) is stale and not shown. `mkb problems readme
--check` fails when the shipped README is not what the generator writes, so the page cannot drift from the data.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from .judge.roofline import H200
from .checker.problem_hash import problem_hash
from .problem_source import evaluate_work
from .problems import FAMILIES, Problem, ProblemSet

_LOG_ROW = re.compile(r"^ok (?P<pid>\S+) (?P<variant>cutedsl|tirx|tirx_cpu): correct on \d+ draws; "
                      r"(?P<speedup>[\d.]+)x eager \((?P<kernel>[\d.e-]+) ms vs (?P<eager>[\d.e-]+) ms")
_DTYPE = re.compile(r"torch\.(bfloat16|float16|half|float32|float|float64|float8_e4m3fn|float8_e5m2|int8|uint8|int16|"
                    r"int32|int64|long|bool)\b")


@dataclass(frozen=True)
class Measurement:
    """One solution's recorded validation: where it ran, its speedup over eager and the eager time."""

    source: str  # the record's file name
    device: str  # 'cuda' or 'cpu'
    speedup: Optional[float]  # None: it passed, but its round trip was too close to the harness's to resolve
    eager_ms: float
    problem_hash: Optional[str]  # None for text records, which do not carry it


def read_validation(path: Path) -> list[tuple[str, str, Measurement]]:
    """(problem id, variant, measurement) rows of a validate report (JSON) or a validate run's printed text."""
    rows: list[tuple[str, str, Measurement]] = []
    if path.suffix == ".json":
        data = json.loads(path.read_text())
        for row in data.get("rows", []) if isinstance(data, dict) else []:
            verdict = row.get("verdict") or {}
            resolved = bool(verdict.get("speedup"))
            if row.get("ok") and verdict.get("eager_ms") and (resolved or verdict.get("timing_resolved") is False):
                rows.append((row["problem_id"], row["variant"], Measurement(
                    path.name, verdict.get("device", "cpu"), float(verdict["speedup"]) if resolved else None,
                    float(verdict["eager_ms"]), verdict.get("problem_hash"))))
        return rows
    text = path.read_text()
    device = "cuda" if "validating" in text and "on cuda" in text else "cpu"
    for line in text.splitlines():
        match = _LOG_ROW.match(line.strip())
        if match:
            rows.append((match["pid"], match["variant"], Measurement(
                path.name, device, float(match["speedup"]), float(match["eager"]), None)))
    return rows


def default_records(repo: Path) -> list[Path]:
    """The recorded validations shipped in benchmarks/results/, oldest first (a later record of the same problem
    hash wins)."""
    results = repo / "benchmarks" / "results"
    return sorted(p for p in results.glob("*validate*") if p.suffix in (".json", ".txt"))


def input_dtypes(problem: Problem) -> str:
    """The torch dtypes make_inputs names (read from the source, not run)."""
    source = problem.path.read_text()
    start = source.find("def make_inputs")
    found = _DTYPE.findall(source[start:] if start >= 0 else "")
    return ", ".join(dict.fromkeys(found)) or "float32"


def _speedup(measurement: Optional[Measurement]) -> str:
    if measurement is None:
        return "-"
    return f"{measurement.speedup:.2f}x" if measurement.speedup is not None else "unresolved"


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def render(problems: ProblemSet, records: Iterable[Path], generator: str) -> str:
    """The README's markdown."""
    # Keyed by problem hash too: a later record of a stale file (a resumed report that kept old rows) must not hide
    # an earlier record of the current one. Text records carry no hash (None) and stand for any.
    latest: dict[tuple[str, str, str, Optional[str]], Measurement] = {}
    used: list[str] = []
    for path in records:
        for pid, variant, m in read_validation(path):
            latest[(pid, variant, m.device, m.problem_hash)] = m
        used.append(path.name)
    counts = {f: sum(1 for p in problems.problems if p.family == f) for f in FAMILIES}
    lines = [
        "# The problem suite",
        "",
        f"<!-- generated by `{generator}`; edit the problem files, sidecars or records, not this page -->",
        "",
        f"{len(problems.problems)} problems: " + ", ".join(f"{f} {n}" for f, n in counts.items()) + ".",
        "Each is posed in CuTe DSL and TIRx (GPU, sm_90a) and ships a solution in both, plus a CPU-target TIRx one",
        "(see AUTHORING.md). A GPU solution is verified where its column shows a speedup or `unresolved` (it passed",
        "the judge on an H200; `unresolved`: its round trip was within 10 % of the harness's own, so no speedup is",
        "claimed); a `-` there means it compiles to sm_90a PTX but has no current H200 record. Shapes are the",
        "production preset; FLOPs and bytes come from the sidecar;",
        "*SOL* is the H200's speed-of-light time for that work (max of FLOPs over the dense tensor-core peak of",
        "the sidecar's `flops_kind` and bytes over 4.8 TB/s). *Eager* and the speedups are the latest recorded",
        "validation (H200 for the GPU columns, the recording host's CPU for `tirx_cpu` at smoke shapes); `-`",
        "means no current record (text records carry no problem hash: they are shown until a newer one).",
        "Hash: the first 8 hex digits of the problem hash (file + sidecar); CHANGELOG.md says why one changed.",
        "",
        "| problem | task (source model, what is fused) | inputs | shapes | FLOPs | bytes | SOL on H200 | "
        "eager on H200 | cutedsl | tirx | tirx_cpu | hash |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in problems.problems:
        current = problem_hash(p.path)

        def measured(variant: str, device: str) -> Optional[Measurement]:
            key = (p.problem_id, variant, device)  # noqa: B023 - measured() is only called in this iteration
            return latest.get((*key, current)) or latest.get((*key, None))  # noqa: B023 - as above

        gpu = [m for m in (measured("cutedsl", "cuda"), measured("tirx", "cuda")) if m]
        cpu = measured("tirx_cpu", "cpu") or measured("tirx_cpu", "cuda")
        side = p.sidecar
        flops = evaluate_work(side.flops, p.shapes) if side.flops else None
        moved = evaluate_work(side.bytes, p.shapes) if side.bytes else None
        sol = H200.floor_s(flops or 0.0, moved, side.flops_kind)[0] * 1e6 if moved is not None else None
        cells = [
            f"`{p.problem_id}`", p.description.replace("|", "\\|"), input_dtypes(p),
            " ".join(f"{k}={v}" for k, v in p.shapes.items()),
            _si(flops, "FLOP") if flops is not None else "-", _si(moved, "B") if moved is not None else "-",
            f"{sol:.3g} µs" if sol is not None else "-",
            f"{gpu[0].eager_ms:.3g} ms" if gpu else "-",
            *(_speedup(m) for m in (measured("cutedsl", "cuda"), measured("tirx", "cuda"))), _speedup(cpu),
            current[:8],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Records read (oldest first; a later one of the same problem hash wins): "
              + (", ".join(used) or "none") + "."]
    return "\n".join(lines) + "\n"
