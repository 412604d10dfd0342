"""The episodic-memory arm: hand the next attempt what happened, not what was concluded.

Instead of the distilled SKILL.md, the reader gets the source attempt's own episodes: each graded submission with
its verdict and an excerpt of the reply that produced it, then the final verdict, at the same length budget as the
skill it replaces. Comparing this arm with the skill arm separates "a record of the previous attempt helps" from
"the model's distillation of it helps". Nothing here is the model's summary: the verdict lines are the judge's, the
excerpts are the model's words at the time, cut short.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from ..records.attempt import AttemptRecord
from ..records.verdict import Verdict

EPISODES_TITLE = "# Episodes from a previous attempt"
CODE_LINES_KEPT = 5        # a code block in an excerpt keeps this many lines: enough to recognise, never a kernel
REASON_CHARS = 200         # a verdict's reason, first line, cut to this
MIN_EXCERPT_CHARS = 80     # an excerpt cut shorter than this says nothing: it is left out instead
_FENCE = re.compile(r"^\s*(```|~~~)")
_BLANK_RUNS = re.compile(r"\n\s*\n(\s*\n)+")


@dataclass(frozen=True, slots=True)
class _Entry:
    head: str       # the submission's heading and verdict line
    excerpt: str    # the reply before it, code blocks cut; "" for none


def episodic_text(record: AttemptRecord, transcript_lines: Optional[Sequence[Mapping[str, Any]]],
                  max_chars: int) -> str:
    """The episodes of `record` as markdown of at most `max_chars` characters.

    Under the title, one entry per graded submission in order (its index, tier, speedup when timed, the check that
    rejected it and the verdict's reason) with, when `transcript_lines` (the parsed lines of its transcript.jsonl)
    are given, an excerpt of the assistant reply before that submission — code blocks cut to their first
    CODE_LINES_KEPT lines, so neither the problem's reference nor a whole kernel is ever handed on — then the final
    verdict. Too long: the excerpts are cut evenly first; when even no excerpts do not fit, the oldest entries are
    left out (noted under the title) and the excerpts get what that frees; the final verdict always stays. A
    synthetic record has no transcript: verdict lines only. A record with no graded submission and no final
    verdict gives "" (the consuming attempt is skipped: there is nothing to read).
    """
    graded = [(s.index, s.verdict) for s in record.submissions if s.counted and s.verdict is not None]
    if (not graded and record.final_verdict is None) or max_chars <= 0:
        return ""
    replies = {} if record.synthetic or transcript_lines is None else replies_before_submissions(transcript_lines)
    entries = [_Entry(f"## Submission {index}: {_verdict_lines(verdict)}", _excerpt(replies.get(index, "")))
               for index, verdict in graded]
    final = _final_block(record)
    longest = max((len(e.excerpt) for e in entries), default=0)
    for skip in range(len(entries) + 1):
        if len(_render(entries, 0, skip, final)) > max_chars:
            continue
        low, high = 0, longest   # the largest even cut that fits (the rendered length grows with it)
        while low < high:
            mid = (low + high + 1) // 2
            if len(_render(entries, mid, skip, final)) <= max_chars:
                low = mid
            else:
                high = mid - 1
        return _render(entries, low, skip, final)
    clipped = _render(entries, 0, len(entries), final)[:max_chars]   # a budget below the final verdict itself
    return clipped[:clipped.rfind("\n") + 1] or clipped


def replies_before_submissions(lines: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """For each submission index in a transcript, the assistant reply that led to it: the last non-empty assistant
    message before its `submission` event (mkb_ray.agents.context.Transcript writes both). A reply that led to
    several submissions is given to the first only, so the same words are not handed on twice."""
    out: dict[int, str] = {}
    reply, reply_line, used = "", -1, -1
    for k, line in enumerate(lines):
        event = line.get("event")
        if line.get("role") == "assistant" and event in (None, "message"):
            content = str(line.get("content") or "").strip()
            if content:
                reply, reply_line = content, k
        elif event == "submission" and isinstance(line.get("index"), int):
            if reply_line >= 0 and reply_line != used:
                out[line["index"]] = reply
                used = reply_line
    return out


def _render(entries: Sequence[_Entry], excerpt_chars: int, skip: int, final: str) -> str:
    parts = [EPISODES_TITLE]
    if skip:
        parts.append(f"_The {skip} earliest graded submission{'s' if skip > 1 else ''} left out for length._")
    for entry in entries[skip:]:
        excerpt = _clip(entry.excerpt, excerpt_chars)
        parts.append(entry.head if not excerpt else f"{entry.head}\nThe reply before it:\n{_quote(excerpt)}")
    parts.append(final)
    return "\n\n".join(parts) + "\n"


def _final_block(record: AttemptRecord) -> str:
    if record.final_verdict is None:
        return f"## Final verdict: none\nNo final kernel was judged (the attempt stopped: {record.stop_reason})."
    return f"## Final verdict: {_verdict_lines(record.final_verdict)}"


def _verdict_lines(v: Verdict) -> str:
    """The verdict's tier and speedup (heading text), then the rejecting check and the reason on the next line."""
    head = v.tier + (f", {v.speedup:.2f}x over eager" if v.speedup is not None else "")
    lines = (v.reason or "").strip().splitlines()
    reason = " ".join(lines[0].split()) if lines else ""
    if len(reason) > REASON_CHARS:
        reason = reason[:REASON_CHARS - 1].rstrip() + "…"
    if v.rejected_by:
        return f"{head}\nRejected by {v.rejected_by}" + (f": {reason}" if reason else ".")
    return f"{head}\nVerdict: {reason}" if reason else head


def _excerpt(reply: str) -> str:
    """The reply with each code block cut to its first CODE_LINES_KEPT lines (an unclosed one is closed), blank
    runs squeezed to one blank line."""
    out: list[str] = []
    in_code, code_lines, cut = False, 0, 0
    for line in reply.strip().splitlines():
        if _FENCE.match(line):
            if in_code and cut:
                out.append(f"… ({cut} more line{'s' if cut > 1 else ''})")
            out.append(line.rstrip())
            in_code, code_lines, cut = not in_code, 0, 0
        elif in_code:
            code_lines += 1
            if code_lines <= CODE_LINES_KEPT:
                out.append(line.rstrip())
            else:
                cut += 1
        else:
            out.append(line.rstrip())
    if in_code:
        if cut:
            out.append(f"… ({cut} more line{'s' if cut > 1 else ''})")
        out.append("```")
    return _BLANK_RUNS.sub("\n\n", "\n".join(out)).strip()


def _clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters with "…" where it was cut; an open code block is closed; under
    MIN_EXCERPT_CHARS there is nothing worth keeping."""
    if len(text) <= limit:
        return text
    if limit < MIN_EXCERPT_CHARS:
        return ""
    cut = text[:limit - 6].rstrip() + " …"
    if sum(1 for line in cut.splitlines() if _FENCE.match(line)) % 2:
        cut += "\n```"
    return cut


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.splitlines())
