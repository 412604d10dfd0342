"""Synthetic SKILL.md files: claims laid out as a writer might, each claim with its ground truth inline.

`render_skill` draws one layout per file (spec.SkillLayout: bullets, numbered list, prose paragraphs, sections
under category-group headings, a mix, or a table) and a few boilerplate sentences that are not claims; styled text
also puts some claims behind a narrative lead-in ("The main lesson here is that <claim>") and joins some pairs
into one sentence ("<claim>; <claim>"), the second one's first letter lower-cased where that reads right. Right
before each claim's text sits its ground-truth comment:

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
from .wordings_styled import LEAD_INS, STYLED_BOILERPLATE

# A claim's ground-truth comment (public: the intervention edits find the comments whose claims they cut by it).
CLAIM_COMMENT = re.compile(r"<!-- claim:(\S+) parent:(\S+) cat:(\S+) mod:(\S+) edge:(\S+) idea:(\S+) var:(\d+) "
                           r"slots:(\S*) --> ")
_HEADER = re.compile(r"^<!-- synthetic-skill attempt:(\S+) tier:(\S+) -->$", re.MULTILINE)
# A comment alone on its line(s) goes with its line; an inline one with the space after it (or before it, at the
# end of a line). `(?:(?!-->).)*` keeps a match inside one comment.
_LINE_COMMENT = re.compile(r"^[ \t]*<!--(?:(?!-->).)*-->[ \t]*(?:\n|\Z)", re.MULTILINE | re.DOTALL)
_INLINE_COMMENT = re.compile(r"[ \t]*<!--(?:(?!-->).)*-->(?=[ \t]*(?:\n|\Z))|<!--(?:(?!-->).)*-->[ \t]?", re.DOTALL)
_BLANK_RUNS = re.compile(r"\n{3,}")
_MIXED_HEADINGS = ("Summary", "Details", "Odds and ends", "Also")
_SECTION_BULLETS_PROB = 0.6
# How a joined pair of claims is put together — "A; b", "A, and b", "A — b" — with cumulative weights 0.6, 0.25, 0.15.
_JOINERS = ("; ", ", and ", " — ")
_JOINER_CUM = (0.6, 0.85, 1.0)
_CAPITALISED_WORD = re.compile(r"[A-Z][a-z]+\b")


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
        pool = BOILERPLATE + (STYLED_BOILERPLATE if layout is not None and layout.phrasings == "styled" else ())
        count = min(poisson(rng, (layout or SkillLayout()).boilerplate_mean), len(pool))
        boiler = rng.sample(pool, count) if count else []
    lines = [f"# {title} (synthetic)",
             f"<!-- synthetic SKILL.md drawn by mkb_ray.synthetic, not written by a model; layout:{name} -->"]
    if attempt is not None or tier is not None:
        lines.append(f"<!-- synthetic-skill attempt:{quote(attempt, safe='/:') if attempt else '-'} "
                     f"tier:{tier or '-'} -->")
    items: list[Optional[str]] = [_tagged(c) for c in claims]
    if rng is not None and layout is not None and (layout.lead_in_share > 0 or layout.compound_share > 0):
        items = _narrated(claims, layout, rng)
    kept = [(c, item) for c, item in zip(claims, items) if item is not None]  # a joined claim is in the item before
    heads, texts = [c for c, _ in kept], [item for _, item in kept]
    blocks = [_list(texts, numbered=False)] if rng is None else _BUILDERS[name](heads, texts, boiler, rng)
    return "\n".join(lines) + "\n\n" + "\n\n".join(blocks) + "\n"


def _tagged(c: SyntheticClaim, lower: bool = False) -> str:
    """A claim's ground-truth comment, a space and its text (first letter lower-cased with `lower`, see `_decap`)."""
    return (f"<!-- claim:{c.claim_id} parent:{','.join(c.parent_ids) or '-'} cat:{c.category} mod:{c.modality} "
            f"edge:{c.edge} idea:{c.idea} var:{c.variant} slots:{_encode_slots(c.slots)} --> "
            f"{_decap(c.text) if lower else c.text}")


def tagged_claim(claim: SyntheticClaim) -> str:
    """A claim as `render_skill` writes one: its ground-truth comment, a space and its text."""
    return _tagged(claim)


def _decap(text: str) -> str:
    """The text with its first letter lower-cased when its first word is an ordinary capitalised word ("The",
    "Eager"); names ("CuTe DSL", "TIRx", "I") keep theirs."""
    return text[0].lower() + text[1:] if _CAPITALISED_WORD.match(text) else text


def _narrated(claims: list[SyntheticClaim], layout: SkillLayout, rng: random.Random) -> list[Optional[str]]:
    """Styled items: each claim behind a narrative lead-in with `lead_in_share`, and with `compound_share` joined to
    the next claim in one sentence (the next item is then None: its text is in this one)."""
    items: list[Optional[str]] = []
    k = 0
    while k < len(claims):
        c = claims[k]
        item = (f"{LEAD_INS[int(rng.random() * len(LEAD_INS))]} {_tagged(c, lower=True)}"
                if rng.random() < layout.lead_in_share and not c.text.endswith("?") else _tagged(c))
        if k + 1 < len(claims) and item.endswith(".") and rng.random() < layout.compound_share:
            joiner = pick(rng, _JOINERS, _JOINER_CUM)
            items += [f"{item[:-1]}{joiner}{_tagged(claims[k + 1], lower=True)}", None]
            k += 2
            continue
        items.append(item)
        k += 1
    return items


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


def _table(claims: list[SyntheticClaim], items: list[str], boiler: list[str], rng: random.Random) -> list[str]:
    rows = ["| # | Note |", "|---|---|", *(f"| {k} | {item} |" for k, item in enumerate(items, 1))]
    return _framed(["\n".join(rows)], boiler)


_BUILDERS = {"bullets": _bullets, "numbered": _numbered, "prose": _prose, "sections": _sections, "mixed": _mixed,
             "table": _table}


# --- reading back -------------------------------------------------------------------------------------------------

def parse_skill(text: Optional[str], strict: bool = True) -> list[SyntheticClaim]:
    """The claims of a SKILL.md written by `render_skill`, in document order. Text without ground-truth comments (a
    file not written by synthetic mode) has no claims; a comment whose claim text does not follow it is an error, or
    with `strict` False a claim that is no longer there (an intervention's edit cut it: the reader sees no such
    claim, so the generator must not count it)."""
    if not text:
        return []
    claims: list[SyntheticClaim] = []
    for m in CLAIM_COMMENT.finditer(text):
        claim_id, parents, cat, mod, edge, idea, var, slot_text = m.groups()
        info = IDEAS.get((cat, idea))
        if info is None or mod not in MODALITIES or edge not in EDGES or int(var) >= len(info.phrasings):
            raise ValueError(f"unknown category, idea, phrasing, modality or edge in {m.group(0)!r}")
        slots = _decode_slots(slot_text)
        body = claim_text(cat, idea, int(var), mod, slots)  # type: ignore[arg-type]
        if not _follows(text, m.end(), body):
            if not strict:
                continue
            raise ValueError(f"claim {claim_id}: the text after its comment is not its ground-truth text {body!r}")
        claims.append(SyntheticClaim(claim_id, () if parents == "-" else tuple(parents.split(",")), cat,
                                     mod, idea, int(var), slots, body, edge))  # type: ignore[arg-type]
    return claims


def _follows(text: str, at: int, body: str) -> bool:
    """Whether `text` at `at` is the claim `body` as `render_skill` writes it: whole, or with its first letter
    lower-cased (`_decap`), or without its final period where a joined claim follows (see `_JOINERS`)."""
    for form in dict.fromkeys((body, _decap(body))):
        if text.startswith(form, at):
            return True
        if form.endswith(".") and text.startswith(form[:-1], at) and \
                any(text.startswith(joiner, at + len(form) - 1) for joiner in _JOINERS):
            return True
    return False


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
