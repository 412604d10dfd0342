"""SKILL.md by constrained decoding, for models too weak to write one freely (the roster's `skill_format:
json_schema`): the SKILL.md turns send a JSON schema as `response_format`, our vLLM server decodes to it, and the
reply is rendered as a SKILL.md with the sections the instructions ask for (skill_instructions.md).

Why a schema and not a plea: SmolLM2-135M, asked for SKILL.md in a fence, wrote shell and JavaScript into it, or
nothing (2026-12-05 quickstart). Under the schema it can only fill the sections with text. The schema bounds every
string so the whole object fits the call's reply cap (`skill_schema(max_tokens)`); a reply cut short anyway is read
as far as it goes (`skill_from_reply`), so a section that was written is never lost to a missing brace.
"""
from __future__ import annotations

import json
import re
from typing import Any, Optional

SCHEMA_NAME = "skill_md_v1"
# The sections, in order: the JSON key and the SKILL.md heading (skill_instructions.md names each).
SECTIONS: tuple[tuple[str, str], ...] = (
    ("workload", "Workload"),
    ("hardware_mapping", "Hardware mapping"),
    ("what_happened", "What the verdicts showed"),
    ("open_questions", "Open questions"),
)
# Conservative characters per token of English text in JSON strings, and the room the keys and braces take.
_CHARS_PER_TOKEN = 3
_OVERHEAD_CHARS = 100
MIN_SECTION_CHARS = 8


def skill_schema(max_tokens: int) -> dict[str, Any]:
    """The `response_format` of a SKILL.md turn whose reply may be `max_tokens` long: every section a string of
    MIN_SECTION_CHARS or more, none longer than its share of the reply, all required."""
    per_section = max(MIN_SECTION_CHARS + 8, (max_tokens * _CHARS_PER_TOKEN - _OVERHEAD_CHARS) // len(SECTIONS))
    properties = {key: {"type": "string", "minLength": MIN_SECTION_CHARS, "maxLength": per_section}
                  for key, _ in SECTIONS}
    schema = {"type": "object", "properties": properties, "required": [key for key, _ in SECTIONS],
              "additionalProperties": False}
    return {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "schema": schema}}


def skill_from_reply(text: str) -> Optional[str]:
    """The SKILL.md a constrained reply holds: each section's text under its heading; sections the reply did not
    reach (cut at the reply cap) are left out; None when no section has any text."""
    values: dict[str, str] = {}
    try:
        data = json.loads(text)
        if isinstance(data, dict):
            values = {k: v for k, v in data.items() if isinstance(v, str)}
    except ValueError:
        # Cut short: take every "key": "value" pair as far as it got (an unfinished last value included).
        for key, _ in SECTIONS:
            match = re.search(rf'"{key}"\s*:\s*"((?:[^"\\]|\\.)*)', text)
            if match:
                try:
                    values[key] = json.loads(f'"{match.group(1)}"')
                except ValueError:
                    values[key] = match.group(1)
    parts = [f"## {heading}\n{values[key].strip()}" for key, heading in SECTIONS if values.get(key, "").strip()]
    return "# SKILL.md\n\n" + "\n\n".join(parts) if parts else None
