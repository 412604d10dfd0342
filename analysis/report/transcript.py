"""An attempt's transcript.jsonl as HTML: one block per event — messages (with the tool calls a reply asked for),
tool results, submissions, start/stop notes — every string escaped. A line that is not a JSON object is shown raw
(escaped), so a damaged transcript still renders.
"""
from __future__ import annotations

import json
from typing import Any

from .html import esc

_SHOWN_KEYS = {"ts", "clock_s", "event", "role", "content", "turn", "purpose", "tool_calls", "name", "arguments",
               "result", "index", "counted", "refused_reason", "tier", "reason"}


def _pre(value: Any) -> str:
    body = value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False, default=str)
    return f"<pre>{esc(body)}</pre>"


def _heading(event: dict[str, Any], label: str) -> str:
    bits = [label]
    if event.get("turn") is not None:
        bits.append(f"turn {event['turn']}")
    if event.get("purpose"):
        bits.append(str(event["purpose"]))
    if event.get("clock_s") is not None:
        bits.append(f"t={event['clock_s']} s")
    return f"<h4>{esc(' · '.join(bits))}</h4>"


def _extra(event: dict[str, Any]) -> str:
    rest = {k: v for k, v in event.items() if k not in _SHOWN_KEYS}
    return _pre(rest) if rest else ""


def _tool_calls(calls: Any) -> str:
    if not isinstance(calls, list):
        return _pre(calls) if calls else ""
    out = []
    for call in calls:
        if isinstance(call, dict):
            out.append(f"<h4>tool call: {esc(call.get('name'))} {esc(call.get('id') or '')}</h4>"
                       f"{_pre(call.get('arguments', ''))}")
        else:
            out.append(_pre(call))
    return "".join(out)


def event_html(event: dict[str, Any]) -> str:
    kind = event.get("event") or ("message" if "role" in event else "other")
    if kind == "message":
        role = str(event.get("role") or "message")
        css = role if role in ("user", "assistant", "system") else "other"
        body = _pre(event.get("content") or "") + _tool_calls(event.get("tool_calls"))
        return f'<div class="ev {css}">{_heading(event, role)}{body}{_extra(event)}</div>'
    if kind == "tool":
        return (f'<div class="ev tool">{_heading(event, "tool " + str(event.get("name")))}'
                f"<h4>arguments</h4>{_pre(event.get('arguments', ''))}<h4>result</h4>{_pre(event.get('result', ''))}"
                f"{_extra(event)}</div>")
    if kind == "submission":
        line = (f"submission {event.get('index')}: "
                + (f"refused ({event.get('refused_reason')})" if not event.get("counted") else
                   f"{event.get('tier')} — {event.get('reason')}"))
        return f'<div class="ev submission">{_heading(event, "submission")}<p>{esc(line)}</p>{_extra(event)}</div>'
    return f'<div class="ev other">{_heading(event, str(kind))}{_extra(event)}</div>'


def transcript_html(raw: str) -> str:
    """Every line of a transcript.jsonl, in order."""
    parts = []
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if isinstance(event, dict):
            parts.append(event_html(event))
        else:
            parts.append(f'<div class="ev other"><h4>unreadable line</h4>{_pre(line)}</div>')
    return "\n".join(parts) or '<p class="none">the transcript is empty</p>'
