"""Support: does the attempt's own record back a claim? Read from the graded submissions, never from the wording.

A claim is `supported` only when a verdict of the same attempt shows it, `contradicted` when a verdict shows the
opposite, else `unsupported` — however confident the claim sounds. The rules, in order:

1. **speed factor** ("3x over eager", "2.4×"): supported if a correct submission measured a speedup within
   ±25 % of it; contradicted if correct submissions were timed and none came near; unsupported if none was timed.
2. **time** ("0.031 ms", "38 us"): supported if a correct submission's kernel time, or the eager time, is within
   ±25 %; otherwise unsupported (a time may be of anything: a variant never submitted, a hand-rolled loop).
3. **closure about speed** ("cannot beat eager", "nothing left to gain"): contradicted if a correct submission was
   faster than eager; else unsupported — one failed try never shows that something cannot be done.
4. **failure** ("failed correctness", "did not compile", "timed out"): supported if a submission failed that way
   (the one named, when the claim names a submission number); contradicted if the named submission did not fail.
5. **correctness** ("passed", "within tolerance"): supported if a submission was correct (the one named, when
   named); contradicted if submissions were graded and none was correct.
Everything else — hardware facts, DSL facts, recipes, untested ideas, open questions — is unsupported.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence

from ..records.attempt import AttemptRecord
from ..records.claims import EvidenceItem, Support

SPEED_TOLERANCE = 0.25   # a measured number within ±25 % of the claimed one backs it (timing noise, rounding)

_FACTOR = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(?:x|×)(?![\w])", re.IGNORECASE)
_TIME = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(ms|us|µs|μs)\b")
_SUBMISSION = re.compile(r"\b(?:submission|sub|attempt|try|v)\s*#?\s*(\d{1,2})\b", re.IGNORECASE)
_SPEED_CLOSURE = re.compile(
    r"(cannot|can't|can not|could not|won't|will not|never|no way to|impossible to)\s+(be made\s+)?"
    r"(beat|outperform|be faster|go faster|improve on|be improved)|nothing (left )?to gain|no point|not worth|"
    r"as fast as it gets|already (optimal|the best|at (memory )?bandwidth)|wasted effort", re.IGNORECASE)
_FAILURE_KINDS: dict[str, re.Pattern[str]] = {
    "compile": re.compile(r"did not compile|didn't compile|compile error|compilation (error|failed)|"
                          r"failed to compile|ptxas|does not compile|won't compile", re.IGNORECASE),
    "correctness": re.compile(r"failed correctness|wrong (result|output|answer|value)|mismatch|"
                              r"out of tolerance|failed (the )?(tolerance|check)|incorrect|NaN", re.IGNORECASE),
    "timeout": re.compile(r"timed out|timeout|hung|hang\b", re.IGNORECASE),
    "crash": re.compile(r"crash|segfault|illegal (memory )?access|out of bounds|CUDA error|runtime error",
                        re.IGNORECASE),
}
_REJECTED_AS = {"compile": {"compile", "import", "static"}, "correctness": {"correctness", "dsl_output", "knockout",
                                                                            "post_timing"},
                "timeout": {"timeout"}, "crash": {"crash", "runtime", "memory_limit"}}
_CORRECT = re.compile(r"\b(passed|passes|pass(ed)? correctness|correct on|within tolerance|matched the reference|"
                      r"matches the reference|bit-exact|exact match|came out right)\b", re.IGNORECASE)
_EAGER = re.compile(r"eager|pytorch|torch|speed|faster|slower", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class SupportJudgement:
    support: Support
    reason: str


def evidence_from_record(record: AttemptRecord) -> list[EvidenceItem]:
    """The graded submissions of an attempt (and its final judgement, as submission 0), as support reads them."""
    items = []
    verdicts = [(s.index, s.verdict) for s in record.submissions if s.counted and s.verdict is not None]
    if record.final_verdict is not None:
        verdicts.append((0, record.final_verdict))
    for index, v in verdicts:
        items.append(EvidenceItem(submission=index, compiled=v.compiled, correct=v.correct, tier=v.tier,
                                  speedup=v.speedup, kernel_ms=v.kernel_ms, eager_ms=v.eager_ms,
                                  rejected_by=v.rejected_by, reason=v.reason[:300]))
    return items


def _near(claimed: float, measured: float) -> bool:
    return measured > 0 and abs(claimed - measured) <= SPEED_TOLERANCE * measured


def _named(text: str, evidence: Sequence[EvidenceItem]) -> Optional[list[EvidenceItem]]:
    numbers = {int(m.group(1)) for m in _SUBMISSION.finditer(text)}
    if not numbers:
        return None
    return [e for e in evidence if e.submission in numbers]


def judge_support(text: str, evidence: Sequence[EvidenceItem]) -> SupportJudgement:
    """The support of one claim, with the verdict that decided it (see the module docstring for the rules)."""
    correct = [e for e in evidence if e.correct]
    timed = [e for e in correct if e.speedup is not None]
    factors = [float(m.group(1)) for m in _FACTOR.finditer(text)]
    factors = [f for f in factors if 0 < f < 1000]
    if factors and (_EAGER.search(text) or "over" in text or "speedup" in text.lower() or len(factors) == 1):
        for f in factors:
            for e in timed:
                if _near(f, e.speedup):  # type: ignore[arg-type]
                    return SupportJudgement("supported", f"submission {e.submission} measured {e.speedup:.2f}x")
        if timed:
            best = max(e.speedup for e in timed)  # type: ignore[type-var]
            speeds = ", ".join(f"{e.speedup:.2f}x" for e in timed)
            return SupportJudgement("contradicted", f"claims {factors[0]:g}x; correct submissions measured "
                                                    f"{speeds} (best {best:.2f}x)")
        return SupportJudgement("unsupported", "a speed claim, but no correct submission was timed")
    times = [_to_ms(float(m.group(1)), m.group(2)) for m in _TIME.finditer(text)]
    if times:
        for t in times:
            for e in correct:
                for measured, what in ((e.kernel_ms, "kernel"), (e.eager_ms, "eager")):
                    if measured is not None and _near(t, measured):
                        return SupportJudgement("supported", f"submission {e.submission}: {what} "
                                                             f"{measured:.4g} ms")
        return SupportJudgement("unsupported", "a time no correct submission measured")
    if _SPEED_CLOSURE.search(text):
        faster = [e for e in timed if e.speedup and e.speedup > 1.0]
        if faster:
            e = max(faster, key=lambda x: x.speedup or 0.0)
            return SupportJudgement("contradicted", f"submission {e.submission} beat eager at {e.speedup:.2f}x")
        return SupportJudgement("unsupported", "a closure: no verdict shows it cannot be done")
    named = _named(text, evidence)
    for kind, pattern in _FAILURE_KINDS.items():
        if pattern.search(text):
            pool = named if named is not None else list(evidence)
            failed = [e for e in pool if _failed_as(e, kind)]
            if failed:
                return SupportJudgement("supported", f"submission {failed[0].submission} failed: "
                                                     f"{failed[0].rejected_by or failed[0].tier}")
            if named:
                return SupportJudgement("contradicted", f"submission {named[0].submission} did not fail that way "
                                                        f"({named[0].tier})")
            return SupportJudgement("unsupported", f"a {kind} failure no verdict shows")
    if _CORRECT.search(text):
        pool = named if named is not None else list(evidence)
        good = [e for e in pool if e.correct]
        if good:
            return SupportJudgement("supported", f"submission {good[0].submission} was correct")
        graded = [e for e in pool if e.correct is not None or not e.compiled]
        if graded:
            return SupportJudgement("contradicted", f"no graded submission was correct "
                                                    f"({', '.join(e.rejected_by or e.tier for e in graded)})")
    return SupportJudgement("unsupported", "no verdict bears on it")


def _failed_as(e: EvidenceItem, kind: str) -> bool:
    if kind == "compile" and not e.compiled:
        return True
    if kind == "correctness" and e.correct is False:
        return True
    return e.rejected_by in _REJECTED_AS[kind]


def _to_ms(value: float, unit: str) -> float:
    return value if unit == "ms" else value / 1000.0
