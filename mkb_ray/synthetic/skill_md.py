"""Synthetic SKILL.md files: claims laid out as a writer might, each claim with its ground truth inline.

`render_skill` draws one layout per file (spec.SkillLayout: bullets, numbered list, prose paragraphs, sections
under category-group headings, or a mix) and a few boilerplate sentences that are not claims. Right before each
claim's sentence sits its ground-truth comment:

    <!-- claim:<id> parent:<id>[,<id>...]|- cat:<category> mod:<modality> edge:<edge> idea:<idea> var:<phrasing>
         slots:<k=v;...> -->  (one line, then a space and the claim's text)

`parse_skill` reads them back (in document order); `strip_ground_truth` removes every comment and leaves clean
text: feed that to an annotator or lineage matcher under test, never the file with its answers. The header
comments name the layout, the writing attempt and its final tier.
"""
from __future__ import annotations

import functools
import random
import re
from typing import Optional
from urllib.parse import quote, unquote

from .claims import EDGES, IDEAS, SyntheticClaim, claim_text, cum_weights, pick, poisson
from .spec import MODALITIES, Layout, SkillLayout
from .wordings import BOILERPLATE, SECTION_HEADINGS, SECTION_OF, TITLES

_CLAIM = re.compile(r"<!-- claim:(\S+) parent:(\S+) cat:(\S+) mod:(\S+) edge:(\S+) idea:(\S+) var:(\d+) slots:(\S*) "
                    r"--> ")
_HEADER = re.compile(r"^<!-- synthetic-skill attempt:(\S+) tier:(\S+) -->$", re.MULTILINE)
# A comment alone on its line(s) goes with its line; an inline one with the space after it (or before it, at the
# end of a line). `(?:(?!-->).)*` keeps a match inside one comment.
_LINE_COMMENT = re.compile(r"^[ \t]*<!--(?:(?!-->).)*-->[ \t]*(?:\n|\Z)", re.MULTILINE | re.DOTALL)
_INLINE_COMMENT = re.compile(r"[ \t]*<!--(?:(?!-->).)*-->(?=[ \t]*(?:\n|\Z))|<!--(?:(?!-->).)*-->[ \t]?", re.DOTALL)
_BLANK_RUNS = re.compile(r"\n{3,}")
_MIXED_HEADINGS = ("Summary", "Details", "Odds and ends", "Also")
_SECTION_BULLETS_PROB = 0.6


def render_skill(claims: list[SyntheticClaim], *, attempt: Optional[str] = None, tier: Optional[str] = None,
                 rng: Optional[random.Random] = None, layout: Optional[SkillLayout] = None) -> str:
    """A synthetic SKILL.md of `claims` (in this order, grouped by section in the sections layout): a title, header
    comments (layout, and the writing attempt and its final tier when given), then the body in a layout drawn from
    `rng` with `layout`'s weights (defaults: SkillLayout()). Without `rng`: plain bullets, no boilerplate. No
    claims: the empty string (an empty SKILL.md)."""
    if not claims:
        return ""
    if rng is None:
        name: Layout = "bullets"
        title, boiler = TITLES[0], []
    else:
        layouts, cum = cum_weights(layout or SkillLayout())
        name = pick(rng, layouts, cum)
        title = TITLES[int(rng.random() * len(TITLES))]
        count = min(poisson(rng, (layout or SkillLayout()).boilerplate_mean), len(BOILERPLATE))
        boiler = rng.sample(BOILERPLATE, count) if count else []
    lines = [f"# {title} (synthetic)",
             f"<!-- synthetic SKILL.md drawn by mkb_ray.synthetic, not written by a model; layout:{name} -->"]
    if attempt is not None or tier is not None:
        lines.append(f"<!-- synthetic-skill attempt:{quote(attempt, safe='/:') if attempt else '-'} "
                     f"tier:{tier or '-'} -->")
    items = [_tagged(c) for c in claims]
    blocks = [_list(items, numbered=False)] if rng is None else _BUILDERS[name](claims, items, boiler, rng)
    return "\n".join(lines) + "\n\n" + "\n\n".join(blocks) + "\n"


def _tagged(c: SyntheticClaim) -> str:
    """A claim's ground-truth comment, a space and its text."""
    return (f"<!-- claim:{c.claim_id} parent:{','.join(c.parent_ids) or '-'} cat:{c.category} mod:{c.modality} "
            f"edge:{c.edge} idea:{c.idea} var:{c.variant} slots:{_encode_slots(c.slots)} --> {c.text}")


# --- layouts: each returns the body's blocks (paragraphs, lists, headings), to be joined by blank lines ----------

def _list(items: list[str], numbered: bool) -> str:
    if numbered:
        return "\n".join(f"{k}. {item}" for k, item in enumerate(items, 1))
    return "\n".join(f"- {item}" for item in items)


def _paragraphs(sentences: list[str], rng: random.Random) -> list[str]:
    """Sentences in paragraphs of 2-4."""
    out, k = [], 0
    while k < len(sentences):
        size = 2 + int(rng.random() * 3)
        out.append(" ".join(sentences[k:k + size]))
        k += size
    return out


def _with_boilerplate(items: list[str], boiler: list[str], rng: random.Random) -> list[str]:
    """The claim sentences with the boilerplate ones put at random places among them."""
    sentences = list(items)
    for sentence in boiler:
        sentences.insert(int(rng.random() * (len(sentences) + 1)), sentence)
    return sentences


def _framed(body: list[str], boiler: list[str]) -> list[str]:
    """A list body with the boilerplate split into a lead paragraph and a closing one."""
    half = (len(boiler) + 1) // 2
    return ([" ".join(boiler[:half])] if half else []) + body + ([" ".join(boiler[half:])] if boiler[half:] else [])


def _bullets(claims: list[SyntheticClaim], items: list[str], boiler: list[str],
             rng: random.Random) -> list[str]:
    return _framed([_list(items, numbered=False)], boiler)


def _numbered(claims: list[SyntheticClaim], items: list[str], boiler: list[str],
              rng: random.Random) -> list[str]:
    return _framed([_list(items, numbered=True)], boiler)


def _prose(claims: list[SyntheticClaim], items: list[str], boiler: list[str], rng: random.Random
           ) -> list[str]:
    return _paragraphs(_with_boilerplate(items, boiler, rng), rng)


def _sections(claims: list[SyntheticClaim], items: list[str], boiler: list[str], rng: random.Random
              ) -> list[str]:
    wording = int(rng.random() * 2)
    groups: dict[str, list[str]] = {}
    for c, item in zip(claims, items):
        groups.setdefault(SECTION_OF.get(c.category, "other"), []).append(item)
    blocks = [" ".join(boiler)] if boiler else []
    for group, headings in SECTION_HEADINGS.items():
        members = groups.get(group)
        if not members:
            continue
        blocks.append(f"## {headings[wording]}")
        if rng.random() < _SECTION_BULLETS_PROB:
            blocks.append(_list(members, numbered=False))
        else:
            blocks.extend(_paragraphs(members, rng))
    return blocks


def _mixed(claims: list[SyntheticClaim], items: list[str], boiler: list[str], rng: random.Random
           ) -> list[str]:
    n_parts = min(len(items), 2 + int(rng.random() * 2))
    cuts = sorted(rng.sample(range(1, len(items)), n_parts - 1)) if n_parts > 1 else []
    bounds = [0, *cuts, len(items)]
    blocks = [" ".join(boiler)] if boiler else []
    style = int(rng.random() * 3)
    headed = rng.random() < 0.5
    for k in range(len(bounds) - 1):
        part = items[bounds[k]:bounds[k + 1]]
        if headed and k > 0:
            blocks.append(f"## {_MIXED_HEADINGS[(k - 1) % len(_MIXED_HEADINGS)]}")
        if style == 0:
            blocks.extend(_paragraphs(part, rng))
        else:
            blocks.append(_list(part, numbered=style == 2))
        style = (style + 1 + int(rng.random() * 2)) % 3  # never the same style twice in a row
    return blocks


_BUILDERS = {"bullets": _bullets, "numbered": _numbered, "prose": _prose, "sections": _sections, "mixed": _mixed}


# --- reading back -------------------------------------------------------------------------------------------------

def parse_skill(text: Optional[str]) -> list[SyntheticClaim]:
    """The claims of a SKILL.md written by `render_skill`, in document order. Text without ground-truth comments (a
    file not written by synthetic mode) has no claims; a comment whose claim text does not follow it is an error."""
    if not text:
        return []
    claims: list[SyntheticClaim] = []
    for m in _CLAIM.finditer(text):
        claim_id, parents, cat, mod, edge, idea, var, slot_text = m.groups()
        info = IDEAS.get((cat, idea))
        if info is None or mod not in MODALITIES or edge not in EDGES or int(var) >= len(info.phrasings):
            raise ValueError(f"unknown category, idea, phrasing, modality or edge in {m.group(0)!r}")
        slots = _decode_slots(slot_text)
        body = claim_text(cat, idea, int(var), mod, slots)  # type: ignore[arg-type]
        if not text.startswith(body, m.end()):
            raise ValueError(f"claim {claim_id}: the text after its comment is not its ground-truth text {body!r}")
        claims.append(SyntheticClaim(claim_id, () if parents == "-" else tuple(parents.split(",")), cat,
                                     mod, idea, int(var), slots, body, edge))  # type: ignore[arg-type]
    return claims


@functools.lru_cache(maxsize=4096)
def _encode_slots(slots: tuple[tuple[str, str], ...]) -> str:
    return ";".join(f"{k}={quote(v, safe='')}" for k, v in slots)


@functools.lru_cache(maxsize=4096)
def _decode_slots(text: str) -> tuple[tuple[str, str], ...]:
    return tuple((k, unquote(v)) for k, _, v in (s.partition("=") for s in text.split(";") if s))


def skill_source_tier(text: Optional[str]) -> Optional[str]:
    """The final tier of the attempt that wrote a synthetic SKILL.md (from its header), or None if unknown."""
    m = _HEADER.search(text or "")
    return None if m is None or m.group(2) == "-" else m.group(2)


def strip_ground_truth(text: str) -> str:
    """The SKILL.md as an agent or annotator would see it: every HTML comment removed, with the line it stood on when
    it stood alone, or the one space that joined it to its claim; runs of blank lines left behind become one."""
    return _BLANK_RUNS.sub("\n\n", _INLINE_COMMENT.sub("", _LINE_COMMENT.sub("", text)))
