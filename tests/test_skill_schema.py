"""SKILL.md by constrained decoding (mkb_ray/agents/skill_schema.py): the schema fits the reply cap, and a reply —
whole or cut short — becomes SKILL.md with the sections in order."""
from __future__ import annotations

import json

from mkb_ray.agents.skill_schema import SECTIONS, skill_from_reply, skill_schema


def test_the_schema_fits_every_section_into_the_reply_cap() -> None:
    for max_tokens in (96, 256, 1024):
        schema = skill_schema(max_tokens)["json_schema"]["schema"]
        assert schema["required"] == [key for key, _ in SECTIONS] and schema["additionalProperties"] is False
        longest = sum(p["maxLength"] for p in schema["properties"].values())
        # 3 characters a token, 100 for keys and braces: the longest allowed object still fits the cap.
        assert longest + 100 <= 3 * max_tokens, max_tokens
        assert all(p["minLength"] == 8 for p in schema["properties"].values())


def test_a_whole_reply_renders_every_section_under_its_heading() -> None:
    reply = json.dumps({"workload": "4096 x 4096 bf16, one read and one write per element",
                        "hardware_mapping": "one block of 256 threads per row",
                        "what_happened": "the first kernel failed: no top-level solve()",
                        "open_questions": "would a warp per row be faster? untested"})
    skill = skill_from_reply(reply)
    assert skill is not None and skill.startswith("# SKILL.md\n\n## Workload\n4096 x 4096 bf16")
    headings = [line for line in skill.splitlines() if line.startswith("## ")]
    assert headings == ["## Workload", "## Hardware mapping", "## What the verdicts showed", "## Open questions"]


def test_a_reply_cut_at_the_cap_keeps_what_it_wrote() -> None:
    cut = '{"workload": "rows of \\"bf16\\" values", "hardware_mapping": "one block per r'
    skill = skill_from_reply(cut)
    assert skill == '# SKILL.md\n\n## Workload\nrows of "bf16" values\n\n## Hardware mapping\none block per r'
    assert skill_from_reply('{"workload": "   "}') is None and skill_from_reply("not json at all") is None
