"""What the attribution judge reads about one harmed cell-replicate, and how it is laid out under a token budget.

A case (`load_case`) holds the two attempts in the target DSL — base (solo) and skill (given the source's SKILL.md)
— with their stop reasons, the judge's verdict on every submission and the final kernel, their transcript.jsonl,
and the source SKILL.md. `render_case` writes it as the judge's user message, in this order: the outcome (tiers,
kernel times, the timing-noise allowance of the target), the SKILL.md, then per attempt its verdicts and its
transcript, the skill attempt last. Every verdict is listed (their reasons are shortened when the lists would take
more than VERDICT_SHARE of the budget); the SKILL.md and the transcripts share what is left of the budget, and a
transcript that does not fit keeps its ends — the task's first lines and as many of the last events as fit (the last
verdicts, the stop and the final messages matter most) — with the number of events left out in between. One event longer
than `EVENT_CHARS` keeps its head and, longer, its tail.

Tokens are estimated as characters / `CHARS_PER_TOKEN` (the agents' own conservative estimate for code and prose).
Pure but for `load_case`, which reads the store (read-only).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ..store import RunStore, SubmissionRow
from .attribution import Cause
from .cells import Attempt, CellReplicate
from .paired import PairingRules, outcome

CHARS_PER_TOKEN = 3.0          # as mkb_ray.agents.context: ~3 characters a token for code, fewer words for prose
EVENT_CHARS = 1500             # longest single transcript event shown whole
FIRST_MESSAGE_CHARS = 600      # the task statement: the judge needs its opening, not the whole of it
HEAD_SHARE = 0.15              # of a transcript's budget, at most, for its first events
SKILL_SHARE = 0.25             # of the flexible budget, at most, for the SKILL.md
REASON_CHARS = 300             # of one verdict's reason (down to 80 when the verdicts would pass VERDICT_SHARE)
VERDICT_SHARE = 0.4            # of the budget, at most, for the verdict lists (the transcripts need the rest)
TRANSCRIPT = "transcript.jsonl"
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_SUBMISSION_SQL = (f"SELECT {', '.join(SubmissionRow._fields)} FROM submissions WHERE trial_id = ? "
                   "ORDER BY is_final, idx")


@dataclass(frozen=True, slots=True)
class AttemptEvidence:
    """One attempt as the judge reads it: the metrics' view (`attempt`), every verdict row (submissions and the
    final one, `is_final`), and its transcript.jsonl text (None: none stored, as in synthetic runs)."""

    attempt: Attempt
    submissions: tuple[SubmissionRow, ...]
    transcript: Optional[str]


@dataclass(frozen=True, slots=True)
class AttributionCase:
    """A harmed cell-replicate with what the judge reads. `noise`: the target's timing-noise allowance (the
    pairing's); `rule_cause`: the rule pass's answer, kept with the case but never shown to the judge."""

    cr: CellReplicate
    base: AttemptEvidence
    skill: AttemptEvidence
    skill_md: Optional[str]
    noise: float
    rule_cause: Optional[Cause] = None


def harmed(replicates: Sequence[CellReplicate], rules: PairingRules = PairingRules()) -> list[CellReplicate]:
    """The resolved cell-replicates whose outcome is harm (analysis.paired), in their given order."""
    return [cr for cr in replicates if cr.resolved and outcome(cr, rules) == "harm"]


def _evidence(store: RunStore, attempt: Attempt) -> AttemptEvidence:
    conn = store.connection
    rows = []
    for r in conn.execute(_SUBMISSION_SQL, (attempt.trial_id,)):
        values = list(r)
        for i in (3, 8, 9):   # counted, compiled, correct: INTEGER 0/1 in the store
            if values[i] is not None:
                values[i] = bool(values[i])
        rows.append(SubmissionRow(*values))
    found = conn.execute("SELECT sha256 FROM artifacts WHERE trial_id = ? AND name = ?",
                         (attempt.trial_id, TRANSCRIPT)).fetchone()
    transcript = None
    if found is not None:
        try:
            transcript = store.artifacts.get(found[0]).decode("utf-8", errors="replace")
        except KeyError:   # ArtifactMissing: listed but not on disk
            transcript = None
    return AttemptEvidence(attempt, tuple(rows), transcript)


def load_case(store: RunStore, cr: CellReplicate, rules: PairingRules = PairingRules(),
              rule_cause: Optional[Cause] = None) -> AttributionCase:
    """The case of one harmed, resolved cell-replicate, read from the store."""
    if cr.base is None or cr.skill is None or cr.source is None:
        raise ValueError(f"cell-replicate {cr.cell_key} r{cr.replicate} is not resolved")
    skill_md = store.skill_text_of(cr.source.skill_sha) if cr.source.skill_sha else None
    return AttributionCase(cr, _evidence(store, cr.base), _evidence(store, cr.skill), skill_md,
                           rules.margin_of(cr), rule_cause)


# -- text -------------------------------------------------------------------------------------------------------
def clip(text: str, limit_chars: int, inline: bool = False) -> str:
    """`text` whole, or its head and (the larger part) its tail with how much was cut between them (on a line of
    its own, or `inline`)."""
    if len(text) <= limit_chars:
        return text
    limit_chars = max(limit_chars, 60)
    head = limit_chars // 3
    tail = limit_chars - head
    gap = f"[... {len(text) - limit_chars:,} characters omitted ...]"
    return f"{text[:head]} {gap} {text[-tail:]}" if inline else f"{text[:head]}\n{gap}\n{text[-tail:]}"


def _ms(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.4g} ms"


def _final_line(label: str, a: Attempt) -> str:
    if a.status != "completed":
        return f"{label}: {a.status}" + (f" ({a.error[:REASON_CHARS]})" if a.error else "")
    state = ("passed" if a.passed else "did not compile" if a.compiled is False
             else "compiled but was not correct" if a.correct is False else "failed")
    speed = f", kernel {_ms(a.kernel_ms)}, {a.speedup:.3g}x eager" if a.passed and a.speedup else ""
    return f"{label}: final tier {a.tier or 'none'} (the final kernel {state}{speed}); stop reason: {a.stop_reason}"


def harm_line(case: AttributionCase) -> str:
    """Why the pairing calls it a harm, with the noise allowance when both passed."""
    base, skill = case.cr.base, case.cr.skill
    assert base is not None and skill is not None
    if base.passed and skill.passed and base.kernel_ms and skill.kernel_ms:
        ratio = skill.kernel_ms / base.kernel_ms
        within = (1 + case.noise) ** 2
        return (f"Harm: both passed, and the skill attempt's kernel is {ratio:.3g}x slower than the base's. The "
                f"timing noise of target {case.cr.target} is {case.noise:.0%}: a slowdown up to "
                f"(1 + noise)^2 = {within:.3g}x is within twice the noise.")
    return "Harm: the skill attempt failed where the base attempt passed."


def verdict_lines(rows: Sequence[SubmissionRow], reason_chars: int = REASON_CHARS) -> str:
    """One line per submission, then the final kernel's verdict, each reason clipped to `reason_chars`."""
    lines = []
    for s in rows:
        where = "final kernel" if s.is_final else f"submission {s.idx}"
        if not s.is_final and not s.counted:
            lines.append(f"- {where}: refused, not judged ({s.refused_reason or 'no reason given'})")
            continue
        facts = [s.tier or "no tier"]
        if s.compiled is False:
            facts.append("did not compile")
        elif s.correct is False:
            facts.append("not correct")
        elif s.correct:
            facts.append(f"correct, kernel {_ms(s.kernel_ms)}, eager {_ms(s.eager_ms)}"
                         + (f", {s.speedup:.3g}x" if s.speedup else ""))
        if s.rejected_by:
            facts.append(f"rejected by {s.rejected_by}")
        reason = " ".join((s.reason or "").split())
        lines.append(f"- {where}: {'; '.join(facts)}"
                     + (f" — {clip(reason, reason_chars, inline=True)}" if reason else ""))
    return "\n".join(lines) or "- no submission was judged"


def event_text(event: dict[str, Any]) -> Optional[str]:
    """One transcript event as a line or block (None: not shown — the start record, the harness's system
    prompt)."""
    kind = event.get("event") or ("message" if "role" in event else "other")
    turn = f" turn {event['turn']}" if event.get("turn") is not None else ""
    if kind == "start" or (kind == "message" and event.get("role") == "system"):
        return None
    if kind == "message":
        purpose = f" ({event['purpose']})" if event.get("purpose") else ""
        cut = " [the reply was cut off at the token limit]" if event.get("finish_reason") == "length" else ""
        calls = event.get("tool_calls") or []
        called = "".join(f"\n  calls {c.get('name')}({clip(str(c.get('arguments', '')), 300)})"
                         for c in calls if isinstance(c, dict))
        return f"[{event.get('role', 'message')}{turn}{purpose}]{cut}\n{event.get('content') or ''}{called}"
    if kind == "tool":
        return (f"[tool {event.get('name')}{turn}] arguments: {clip(str(event.get('arguments', '')), 400)}\n"
                f"result: {event.get('result', '')}")
    if kind == "submission":
        if not event.get("counted"):
            return f"[submission {event.get('index')}] refused: {event.get('refused_reason')}"
        return f"[submission {event.get('index')}] {event.get('tier')} — {event.get('reason')}"
    if kind == "stop":
        return f"[stop] {event.get('reason')}"
    if kind == "final":
        facts = [f"{k} {event[k]}" for k in ("tier", "status", "error") if event.get(k) is not None]
        return f"[final] {', '.join(facts)}"
    if kind == "llm_error":
        return f"[model call failed{turn}] {event.get('error_kind')}: {clip(str(event.get('error', '')), 300)}"
    if kind == "note":
        return f"[note] {event.get('text', '')}"
    if kind == "skill_update":
        return f"[SKILL.md updated, {event.get('chars')} characters]"
    rest = {k: v for k, v in event.items() if k not in ("ts", "clock_s", "event")}
    return f"[{kind}] {json.dumps(rest, ensure_ascii=False, default=str)}"


def transcript_events(raw: str) -> list[str]:
    """The shown events of a transcript.jsonl, each clipped to EVENT_CHARS (the first message, the task statement,
    to FIRST_MESSAGE_CHARS); a line that is not a JSON object is shown as it is."""
    out: list[str] = []
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        text = event_text(event) if isinstance(event, dict) else f"[unreadable line] {line}"
        if text is not None:
            out.append(clip(text, FIRST_MESSAGE_CHARS if not out else EVENT_CHARS))
    return out


def trim_events(events: Sequence[str], budget_chars: int) -> str:
    """The events joined, or — when they do not fit in `budget_chars` — the first ones (at most HEAD_SHARE of the
    budget; the first one always, clipped) and as many of the last as fit, with how many were left out between."""
    joined = "\n".join(events)
    if len(joined) <= budget_chars or len(events) == 1:
        return clip(joined, budget_chars)
    # The first event (the task statement) always opens it, clipped to the head's share if need be.
    head = [clip(events[0], max(int(budget_chars * HEAD_SHARE), 150))] if events else []
    used = len(head[0]) + 1 if head else 0
    for text in events[1:]:
        if used + len(text) + 1 > budget_chars * HEAD_SHARE:
            break
        head.append(text)
        used += len(text) + 1
    tail: list[str] = []
    for text in reversed(events[len(head):]):
        if used + len(text) + 1 > budget_chars - 60:
            break
        tail.append(text)
        used += len(text) + 1
    if not tail and len(events) > len(head):   # the last event alone is too long: its end, then
        tail.append(clip(events[-1], max(budget_chars - used - 60, 60)))
    left_out = len(events) - len(head) - len(tail)
    gap = [f"[... {left_out} events omitted ...]"] if left_out else []
    return "\n".join([*head, *gap, *reversed(tail)])


def skill_text_shown(text: Optional[str]) -> str:
    """The SKILL.md as the judge reads it: without HTML comments (never claims, as for the segmenter; in
    synthetic runs they carry the generator's own labels, which would hand the judge the answer)."""
    return re.sub(r"\n[ \t]*\n(?:[ \t]*\n)+", "\n\n", _COMMENT.sub("", text or "")).strip()


def render_case(case: AttributionCase, budget_tokens: int) -> str:
    """The judge's user message for `case`, at most about `budget_tokens` tokens (see the module docstring)."""
    cr = case.cr
    base, skill = case.base, case.skill
    fixed = "\n".join([
        f"Problem {cr.problem_id} (family {cr.family}); model {cr.model}; target {cr.target}; direction "
        f"{cr.direction}: the SKILL.md was written by a solo attempt in {cr.source_dsl}, the base and skill "
        f"attempts are in {cr.target_dsl}; replicate {cr.replicate}.",
        "", "## Outcome",
        _final_line(f"Base attempt (solo {cr.target_dsl}, no SKILL.md)", base.attempt),
        _final_line(f"Skill attempt ({cr.target_dsl}, given the SKILL.md)", skill.attempt),
        harm_line(case)])
    sections = [("base", base), ("skill", skill)]
    budget_chars = int(budget_tokens * CHARS_PER_TOKEN)
    reason_chars = REASON_CHARS
    while True:   # every verdict is listed; their reasons get shorter if they would crowd out the transcripts
        verdicts = {name: verdict_lines(ev.submissions, reason_chars) for name, ev in sections}
        if sum(len(v) for v in verdicts.values()) <= budget_chars * VERDICT_SHARE or reason_chars <= 80:
            break
        reason_chars = max(80, reason_chars // 2)
    left = budget_chars - len(fixed) - sum(len(v) for v in verdicts.values()) - 600
    skill_md = skill_text_shown(case.skill_md)
    source = cr.source
    source_note = f", whose final tier was {source.tier}" if source is not None and source.tier else ""
    skill_text = clip(skill_md, max(int(left * SKILL_SHARE), 200)) if skill_md else "(empty or not stored)"
    left -= len(skill_text)
    events = {name: transcript_events(ev.transcript) if ev.transcript else [] for name, ev in sections}
    sizes = {name: len("\n".join(e)) for name, e in events.items()}
    # Each transcript gets half of what is left; one that needs less hands the rest to the other.
    half = max(left // 2, 0)
    share = {"base": min(sizes["base"], max(half, left - sizes["skill"])),
             "skill": min(sizes["skill"], max(half, left - sizes["base"]))}
    parts = [fixed, "", f"## SKILL.md given to the skill attempt (written by the {cr.source_dsl} solo "
                        f"attempt{source_note})", skill_text]
    for name, _ in sections:
        label = "Base attempt" if name == "base" else "Skill attempt"
        shown = trim_events(events[name], max(share[name], 200)) if events[name] else "(no transcript stored)"
        parts += ["", f"## {label}: verdicts", verdicts[name], "", f"## {label}: transcript", shown]
    parts += ["", "Which cause best explains why the skill attempt came out worse than the base? Reply with the "
                  "JSON object only."]
    return "\n".join(parts)
