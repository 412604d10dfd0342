"""Text edits of a SKILL.md by claim: cut claims out, label them, or trim the whole text to a length.

The intervention arms hand the next attempt an edited SKILL.md, and the effect of an arm is read against its
control, so an edit must change what it names and nothing else: claims that are not touched keep their exact
characters, and an edit that touches nothing returns the text byte-identical (the campaign skips a hand-off that
equals its control's). Claims are the spans `mkb_ray.claims.segment.segment` cuts from the same text.

Synthetic SKILL.md files carry a ground-truth comment right before each claim's text (`<!-- claim:... --> `, see
mkb_ray.synthetic.skill_md), and `parse_skill` raises when the text after such a comment is not its claim. The
segmenter's claims do not always line up with the synthetic ones (it cuts some in two, and a claim joined to the
next one loses its final period), so after an edit every synthetic claim comment is checked with parse_skill's own
rule, and one whose claim no longer follows is deleted. That step exists only so synthetic skills stay parseable: a
real SKILL.md has no such comments, and it never changes one.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import AbstractSet, Optional, Sequence

from ..claims.segment import segment
from ..records.claims import ClaimRecord
from ..synthetic.skill_md import CLAIM_COMMENT as _SYNTHETIC_CLAIM_COMMENT
from ..synthetic.skill_md import parse_skill

UNVERIFIED_LABEL = "(unverified — test before relying on it)"

# Cut points are marked in the text by one private-use character while the text around them is tidied; the first
# one the text does not contain is used, so a text that happens to hold U+E000 still comes out right.
_MARK_RANGE = range(0xE000, 0xF900)
_FENCE_LINE = re.compile(r"^\s*(```|~~~)", re.MULTILINE)
# Joint punctuation left dangling by a cut: at the end of what precedes it, or at the start of what follows.
_JOINT_TAIL = re.compile(r"\s*(?:[;,]|[—–]|--)\s*$")
_JOINT_HEAD = re.compile(r"^(?:[;,]|[—–]|--)\s*")
_LIST_MARKER_ONLY = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])?\s*$")
_LIST_MARKER = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")
# What precedes a cut when nothing of the same sentence does: a sentence end, a colon, a table bar, a comment.
_SENTENCE_START = re.compile(r"(?:[.!?:|][\"')\]*_]*|-->)$")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_LETTER = re.compile(r"[^\W\d_]")
_WORD_END = re.compile(r"[\w)\]\"'`*]$")


@dataclass(frozen=True, slots=True)
class _SyntheticComment:
    """A synthetic ground-truth comment: where it starts, where its claim text starts and (when that text follows
    it whole) ends; `body_end` is None for a comment whose claim text is gone."""

    start: int
    body_start: int
    body_end: Optional[int]


def remove_claims(text: str, claims: Sequence[ClaimRecord], drop: AbstractSet[int]) -> str:
    """`text` without the claims whose `index` is in `drop`, tidied so what is left reads as written.

    A comment standing right before a removed claim (only blanks, and at most one line break, between) goes with
    it: in a synthetic skill that is the claim's ground truth. What a cut leaves is tidied where the cut was, never
    elsewhere: a list item, table row or line left without a letter is removed whole; of two joints the cut
    leaves side by side the stronger stays ("A, [cut]; C" -> "A; C", the left one on a tie); a joint left dangling
    is dropped at the start of a sentence ("[cut]; b" -> "b") and becomes a period at its end ("A, [cut]" -> "A.",
    "A, [cut]. B" -> "A. B"); blanks are joined to one space; a run of 3+ newlines at a cut becomes 2. A
    remaining claim that began in the middle of a sentence keeps its lower-case first letter (its characters are
    its own). Synthetic claim comments whose claim text no longer follows are deleted (module docstring). With
    nothing to drop, `text` is returned unchanged.
    """
    spans = sorted(_cut_of(text, c) for c in claims if c.index in drop)
    if not spans:
        return text
    mark = _free_char(text)
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces, at = [], 0
    for start, end in merged:
        pieces += [text[at:start], mark]
        at = end
    out = _tidy(_join_marks("".join(pieces) + text[at:], mark), mark)
    broken = _broken_comments(out, mark)
    if broken:
        out = _tidy(_join_marks(_replace_spans(out, broken, mark), mark), mark)
    out = _collapse_blank_runs(_drop_empty_lines(out, mark), mark).replace(mark, "")
    if text.endswith("\n") and not text.endswith("\n\n") and out.endswith("\n\n"):
        out = out.rstrip("\n") + "\n"
    return out.lstrip("\n") if not text.startswith("\n") else out


def mark_claims(text: str, claims: Sequence[ClaimRecord], mark: AbstractSet[int],
                label: str = UNVERIFIED_LABEL) -> str:
    """`text` with " " + `label` right after each claim whose `index` is in `mark`; nothing else changes.

    The label goes right after the claim's span. The segmenter keeps a claim's own sentence-final period in its
    span, so a whole sentence reads "Use X. (unverified — ...)"; a clause cut before a joint gets the label before
    the joint's punctuation: "A (unverified — ...); b". In a synthetic skill, where a label there would split a
    claim's ground-truth text from its comment or from the joiner that ends it, the label goes (with a space after
    it) right before that claim's comment instead. With nothing to mark, `text` is returned unchanged.
    """
    chosen = [c for c in claims if c.index in mark]
    if not chosen:
        return text
    synthetic = [c for c in _synthetic_comments(text) if c.body_end is not None]
    inserts: list[tuple[int, int, str]] = []
    for claim in chosen:
        at, inside = claim.end, _inside(synthetic, claim.end)
        if inside is None:
            inserts.append((at, claim.index, " " + label))
            continue
        while inside is not None:   # a comment's start is never inside its own text; it may be in the one before
            at = inside.start
            inside = _inside(synthetic, at)
        inserts.append((at, claim.index, label + " "))
    out = text
    for at, _, insert in sorted(inserts, reverse=True):
        out = out[:at] + insert + out[at:]
    return out


def trim_to_length(text: str, max_chars: int) -> str:
    """A placebo's text: the longest prefix of `text` of at most `max_chars` characters that ends where a claim
    ends or a line ends, so the reader gets whole claims of the same kind of file at the length of the real one.

    When even the first claim ends past `max_chars`, the prefix ends at the last blank before `max_chars` instead.
    An HTML comment or a code fence the prefix leaves open is dropped from where it opens, a synthetic claim comment
    whose claim was cut is deleted (module docstring), and trailing blanks become one newline where it fits. A text
    already short enough is returned unchanged; the result is never longer than `max_chars`.
    """
    if len(text) <= max_chars:
        return text
    if max_chars <= 0:
        return ""
    claims = segment(text)
    claim_ends = [c.end for c in claims if c.end <= max_chars]
    line_ends = [k + 1 for k in range(max_chars) if text[k] == "\n"]
    if (claims and not claim_ends) or not (claim_ends or line_ends):
        blank = max(text.rfind(" ", 0, max_chars), text.rfind("\n", 0, max_chars), text.rfind("\t", 0, max_chars))
        cut = blank if blank > 0 else max_chars
    else:
        cut = max(claim_ends + line_ends)
    prefix = text[:cut]
    opened = prefix.rfind("<!--")
    if opened > prefix.rfind("-->"):
        prefix = prefix[:opened]
    fences = list(_FENCE_LINE.finditer(prefix))
    if len(fences) % 2:
        prefix = prefix[:fences[-1].start()]
    broken = [(c.start, c.body_start) for c in _synthetic_comments(prefix) if c.body_end is None]
    prefix = _replace_spans(prefix, broken, "").rstrip()
    return prefix + "\n" if prefix and len(prefix) < max_chars else prefix


# --- synthetic ground truth ---------------------------------------------------------------------------------------

def _synthetic_comments(text: str) -> list[_SyntheticComment]:
    """Every synthetic claim comment of `text`, each checked by parse_skill on the text up to the next one (a
    claim's text always ends before the next comment): its claim text follows it, or it does not."""
    found = list(_SYNTHETIC_CLAIM_COMMENT.finditer(text))
    ends = [m.start() for m in found[1:]] + [len(text)]
    out: list[_SyntheticComment] = []
    for m, next_start in zip(found, ends):
        try:
            parsed = parse_skill(text[m.start():next_start])
        except ValueError:
            parsed = []
        body_end = m.end() + len(parsed[0].text) if parsed else None
        out.append(_SyntheticComment(m.start(), m.end(), body_end))
    return out


def _broken_comments(text: str, mark: str) -> list[tuple[int, int]]:
    """The spans of the synthetic claim comments whose claim text no longer follows them, read as if the cut marks
    were not there (a mark sits where a cut was, which may be between a kept claim and its joiner)."""
    kept = [k for k, ch in enumerate(text) if ch != mark]
    clean = text.replace(mark, "")
    return [(kept[c.start], kept[c.body_start - 1] + 1) for c in _synthetic_comments(clean) if c.body_end is None]


def _inside(comments: Sequence[_SyntheticComment], at: int) -> Optional[_SyntheticComment]:
    """The synthetic claim whose text `at` falls in (a label there would break it), if any. The text's end is
    outside: a label after a whole claim is harmless."""
    for c in comments:
        if c.body_end is not None and c.body_start <= at < c.body_end:
            return c
    return None


# --- cutting and tidying ------------------------------------------------------------------------------------------

def _free_char(text: str) -> str:
    return next(chr(cp) for cp in _MARK_RANGE if chr(cp) not in text)


def _cut_of(text: str, claim: ClaimRecord) -> tuple[int, int]:
    """What removing one claim cuts: its span, with the comment right before it (`_comment_before`). A clause that
    ends its sentence after a joint ("A, and b.") leaves its period, for the clause before it to end on."""
    start, end = _comment_before(text, _after_bare_cells(text, claim.start, claim.end)), claim.end
    if end > start and text[end - 1] == "." and _JOINT_TAIL.search(text[max(0, start - 8):start].rstrip(" \t")):
        end -= 1
    return start, end


def _after_bare_cells(text: str, start: int, end: int) -> int:
    """Where a claim's own words start: past the table cells without a letter (a row number) that the segmenter
    takes into a table row's claim, so removing the claim leaves the row's cells standing."""
    at = start
    while (bar := text.find("|", at, end)) >= 0 and not _LETTER.search(_HTML_COMMENT.sub("", text[at:bar])):
        at = bar + 1
    while at < end and text[at] in " \t":
        at += 1
    return at


def _comment_before(text: str, start: int) -> int:
    """Where a removed claim's cut starts: at an HTML comment that ends right before the claim (blanks and at most
    one line break between), else at the claim."""
    close = text.rfind("-->", 0, start)
    if close < 0 or not re.fullmatch(r"[ \t]*\n?[ \t]*", text[close + 3:start]):
        return start
    opened = text.rfind("<!--", 0, close)
    return start if opened < 0 else opened


def _replace_spans(text: str, spans: Sequence[tuple[int, int]], insert: str) -> str:
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + insert + text[end:]
    return text


def _join_marks(text: str, mark: str) -> str:
    """Cut marks with only blanks (or emphasis, brackets or quotes left empty) between them become one."""
    m = re.escape(mark)
    text = re.sub(rf"{m}(?:[ \t]*{m})+", mark, text)
    return re.sub(rf"\*\*[ \t]*{m}[ \t]*\*\*|__[ \t]*{m}[ \t]*__|\*[ \t]*{m}[ \t]*\*|`[ \t]*{m}[ \t]*`|"
                  rf"\"[ \t]*{m}[ \t]*\"|\([ \t]*{m}[ \t]*\)", mark, text)


def _tidy(text: str, mark: str) -> str:
    """Each cut mark joined to its line's text on both sides (see `_join`), left to right."""
    at = text.find(mark)
    while at != -1:
        line_start = text.rfind("\n", 0, at) + 1
        line_end = text.find("\n", at)
        line_end = len(text) if line_end < 0 else line_end
        left, right = _join(text[line_start:at], text[at + 1:line_end], mark)
        text = text[:line_start] + left + mark + right + text[line_end:]
        at = text.find(mark, line_start + len(left) + 1)
    return text


def _join(left: str, right: str, mark: str) -> tuple[str, str]:
    """The line's text before and after one cut, with dangling joints dropped and one space between."""
    stripped, rest = left.rstrip(" \t" + mark), right.lstrip(" \t")   # an earlier cut right before: one mark
    seen = stripped.replace(mark, "")
    tail = _JOINT_TAIL.search(stripped)
    head = _JOINT_HEAD.match(rest)
    if tail is not None and head is not None:   # "A; [cut], C": the stronger joint joins A and C, the left on a tie
        if stripped[tail.start():].strip() == "," and rest[:head.end()].strip() != ",":
            stripped = stripped[:tail.start()].rstrip(" \t" + mark)
        else:
            rest = rest[head.end():]
    elif tail is not None and (not rest or rest[0] in ".!?|"):
        stripped = stripped[:tail.start()].rstrip(" \t" + mark)
        if rest and rest[0] in ".!?":   # the cut clause's own period (`_cut_of`) now ends the clause before it
            stripped, rest = stripped + rest[0], rest[1:].lstrip(" \t")
        elif _WORD_END.search(stripped):   # the sentence ended at the cut: the joint becomes its period
            stripped += "."
    elif head is not None and (_LIST_MARKER_ONLY.match(seen) or _SENTENCE_START.search(seen.rstrip())):
        rest = rest[head.end():]
    if not stripped.strip():
        return (left if rest else ""), rest
    if not rest or rest[0] in ".,;:!?)":
        return stripped, rest
    return stripped + " ", rest


def _drop_empty_lines(text: str, mark: str) -> str:
    """A line holding a cut and no letter (a bare list marker, an empty table row, stray punctuation) is removed,
    its line break with it; the mark stays so the blank lines around can be collapsed."""
    lines = text.split("\n")
    cut = [mark in line for line in lines]   # only lines a cut touched; a mark carried down does not count
    out: list[str] = []
    for k, line in enumerate(lines):
        if cut[k]:
            seen = _LIST_MARKER.sub("", _HTML_COMMENT.sub("", line.replace(mark, "")), count=1)
            if not _LETTER.search(seen):
                if k + 1 < len(lines):
                    lines[k + 1] = mark + lines[k + 1]
                else:
                    out.append(mark)
                continue
        out.append(line)
    return "\n".join(out)


def _collapse_blank_runs(text: str, mark: str) -> str:
    """A run of 3+ line breaks that holds a cut becomes 2; other runs are the author's and stay."""
    def collapse(m: re.Match[str]) -> str:
        run = m.group(0)
        return "\n\n" if mark in run and run.count("\n") >= 3 else run
    return re.sub(rf"\n[\s{re.escape(mark)}]*\n", collapse, text)
