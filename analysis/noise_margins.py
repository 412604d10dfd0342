"""How much faster one passing kernel must look than another before the analysis calls it faster: the judge's
measured timing noise, per target and per kernel-time class.

Two judgements of the same kernel differ; how much depends on where it runs and how long it takes (on the H200 a
50 µs kernel's speedup moves far more between judgements than a 1 ms one's). `noise_margins.json`, next to this
file, records for each target a few classes of judged kernel time and, for each, the margin: a time ratio below
1 + margin is not evidence that one kernel is faster. `benchmarks/noise_margins.py` writes it from repeat
judgements of the shipped solutions (`benchmarks/timing_fidelity.py` on the GPU, `benchmarks/timing_noise.py` on
the CPU) and says which files it read; re-run it whenever the judge's timing changes.

A pair of kernels takes the larger margin of their two classes: a comparison is as noisy as its noisier side.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

RECORDED = Path(__file__).with_name("noise_margins.json")


class NoiseMarginsError(ValueError):
    """A noise-margins file that cannot be used, with the file and the field that is wrong."""


@dataclass(frozen=True)
class MarginClass:
    min_ms: float  # kernels judged at this time or longer fall here, up to the next class's min_ms
    margin: float  # 'faster' needs a kernel-time ratio above 1 + margin
    kernels: int  # measured kernels (problem x DSL) the margin summarises


@dataclass(frozen=True)
class TargetMargins:
    classes: tuple[MarginClass, ...]  # ascending min_ms, the first at 0
    source: str  # where the measurements are recorded

    def of(self, kernel_ms: Optional[float]) -> float:
        """The margin of a kernel judged at `kernel_ms`; an unknown time takes the target's largest margin."""
        if kernel_ms is None:
            return max(c.margin for c in self.classes)
        return [c for c in self.classes if c.min_ms <= kernel_ms][-1].margin


@dataclass(frozen=True)
class NoiseMargins:
    targets: Mapping[str, TargetMargins]
    statistic: str  # how one class's margin was computed from its kernels' repeat judgements

    def margin(self, target: str, *kernel_ms: Optional[float]) -> float:
        """The margin for comparing kernels judged at these times on `target` (the larger of their classes'); with
        no time, or a target never measured, the largest margin recorded for it (or for any target)."""
        known = self.targets.get(target)
        if known is None:
            return max(t.of(None) for t in self.targets.values())
        return max(known.of(ms) for ms in kernel_ms) if kernel_ms else known.of(None)

    def as_json(self) -> dict[str, Any]:
        return {"statistic": self.statistic,
                "targets": {name: {"source": t.source,
                                   "classes": [{"min_ms": c.min_ms, "margin": c.margin, "kernels": c.kernels}
                                               for c in t.classes]}
                            for name, t in self.targets.items()}}


def parse_noise_margins(data: Any, where: str) -> NoiseMargins:
    """Validate the JSON form (`as_json`); errors name `where` and the field."""
    def fail(field: str, why: str) -> NoiseMarginsError:
        return NoiseMarginsError(f"{where}: {field}: {why}")

    if not isinstance(data, dict):
        raise fail("(top level)", "expected an object with 'statistic' and 'targets'")
    targets = data.get("targets")
    if not isinstance(targets, dict) or not targets:
        raise fail("targets", "expected a non-empty object: target name -> {source, classes}")
    parsed: dict[str, TargetMargins] = {}
    for name, body in targets.items():
        field = f"targets.{name}"
        if not isinstance(body, dict) or not isinstance(body.get("classes"), list) or not body["classes"]:
            raise fail(f"{field}.classes", "expected a non-empty list of {min_ms, margin, kernels}")
        classes = []
        for index, item in enumerate(body["classes"]):
            at = f"{field}.classes[{index}]"
            try:
                one = MarginClass(float(item["min_ms"]), float(item["margin"]), int(item["kernels"]))
            except (KeyError, TypeError, ValueError) as err:
                raise fail(at, f"expected numbers min_ms, margin and kernels ({type(err).__name__}: {err})") from err
            if not one.margin >= 0 or not one.min_ms >= 0 or one.kernels < 1:
                raise fail(at, f"margin and min_ms must be >= 0 and kernels >= 1, got {item}")
            if classes and one.min_ms <= classes[-1].min_ms:
                raise fail(at, "classes must ascend by min_ms")
            classes.append(one)
        if classes[0].min_ms != 0:
            raise fail(f"{field}.classes[0].min_ms", "the first class must start at 0 (every time needs a class)")
        parsed[str(name)] = TargetMargins(tuple(classes), str(body.get("source", "")))
    return NoiseMargins(parsed, str(data.get("statistic", "")))


def load_noise_margins(path: Path = RECORDED) -> NoiseMargins:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise NoiseMarginsError(f"{path}: cannot be read as JSON ({err})") from err
    return parse_noise_margins(data, str(path))


__all__ = ["MarginClass", "NoiseMargins", "NoiseMarginsError", "RECORDED", "TargetMargins", "load_noise_margins",
           "parse_noise_margins"]
