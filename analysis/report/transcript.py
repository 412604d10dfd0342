"""An attempt's transcript.jsonl as the pages show it: one block per event — messages (with the tool calls a reply
asked for), tool results, submissions, start/stop notes. A line that is not a JSON object is shown raw, so a
damaged transcript still renders. This module only reads the events into headings, paragraphs and preformatted
text; transcript.html.j2 writes them, escaped like everything else.
"""
from __future__ import annotations

import json
from typing import Any, Literal, NamedTuple

_SHOWN_KEYS = {"ts", "clock_s", "event", "role", "content", "turn", "purpose", "tool_calls", "name", "arguments",
               "result", "index", "counted", "refused_reason", "tier", "reason"}


class Part(NamedTuple):
    """One element of an event's block: a heading (h4), a paragraph (p) or preformatted text (pre)."""

    tag: Literal["h4", "p", "pre"]
    text: str


class Event(NamedTuple):
    """One event's block; `css` is its class (the speaker's colour: user, assistant, system, tool, ...)."""

    css: str
    parts: tuple[Part, ...]


def _pre(value: Any) -> Part:
    return Part("pre", value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False,
                                                                        default=str))


def _heading(event: dict[str, Any], label: str) -> Part:
    bits = [label]
    if event.get("turn") is not None:
        bits.append(f"turn {event['turn']}")
    if event.get("purpose"):
        bits.append(str(event["purpose"]))
    if event.get("clock_s") is not None:
        bits.append(f"t={event['clock_s']} s")
    return Part("h4", " · ".join(bits))


def _extra(event: dict[str, Any]) -> list[Part]:
    rest = {k: v for k, v in event.items() if k not in _SHOWN_KEYS}
    return [_pre(rest)] if rest else []


def _tool_calls(calls: Any) -> list[Part]:
    if not isinstance(calls, list):
        return [_pre(calls)] if calls else []
    out = []
    for call in calls:
        if isinstance(call, dict):
            name, call_id = call.get("name"), call.get("id") or ""
            out += [Part("h4", f"tool call: {'' if name is None else name} {call_id}"),
                    _pre(call.get("arguments", ""))]
        else:
            out.append(_pre(call))
    return out


def event_parts(event: dict[str, Any]) -> Event:
    """One transcript event as its block."""
    kind = event.get("event") or ("message" if "role" in event else "other")
    if kind == "message":
        role = str(event.get("role") or "message")
        css = role if role in ("user", "assistant", "system") else "other"
        return Event(css, (_heading(event, role), _pre(event.get("content") or ""),
                           *_tool_calls(event.get("tool_calls")), *_extra(event)))
    if kind == "tool":
        return Event("tool", (_heading(event, "tool " + str(event.get("name"))), Part("h4", "arguments"),
                              _pre(event.get("arguments", "")), Part("h4", "result"), _pre(event.get("result", "")),
                              *_extra(event)))
    if kind == "submission":
        line = (f"submission {event.get('index')}: "
                + (f"refused ({event.get('refused_reason')})" if not event.get("counted") else
                   f"{event.get('tier')} — {event.get('reason')}"))
        return Event("submission", (_heading(event, "submission"), Part("p", line), *_extra(event)))
    return Event("other", (_heading(event, str(kind)), *_extra(event)))


def transcript_events(raw: str) -> list[Event]:
    """Every line of a transcript.jsonl, in order (empty lines skipped)."""
    events = []
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if isinstance(event, dict):
            events.append(event_parts(event))
        else:
            events.append(Event("other", (Part("h4", "unreadable line"), _pre(line))))
    return events
