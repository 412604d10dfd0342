"""Intervention arms' text transforms (issue 29): claims cut out, labelled or trimmed with everything else left as
written; the verification gate; the episodic hand-off. Synthetic skills must stay parseable after every edit."""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Optional

import pytest

from mkb_ray.claims.segment import segment
from mkb_ray.interventions import (EPISODES_TITLE, UNVERIFIED_LABEL, episodic_text, gate_skill, mark_claims,
                                   remove_claims, trim_to_length)
from mkb_ray.interventions.edit import _synthetic_comments
from mkb_ray.records.attempt import AttemptConfig, AttemptRecord, SubmissionRecord
from mkb_ray.records.verdict import Verdict
from mkb_ray.synthetic import ClaimContext, SyntheticSpec, evolve, fresh_claims, parse_skill, render_skill
from mkb_ray.synthetic import strip_ground_truth
from mkb_ray.synthetic.spec import LAYOUTS, STYLED_TEXT, SkillLayout

NOW = "2026-01-01T00:00:00+00:00"
LABEL = " " + UNVERIFIED_LABEL

BULLETS = ("# Notes\n\n- Use 128-thread blocks for the row reduction.\n"
           "- Accumulate the partial sums in fp32; cast to bf16 only at the final store.\n"
           "- Vectorised loads gave 2.1x over eager.\n")
NUMBERED = ("## What worked\n\n1. Submission 1 failed correctness because of a race on the tail.\n"
            "2. Accumulate the partial sums in fp32 and cast once at the store.\n"
            "3. Tensor cores cannot beat eager for this op.\n\nGood luck.\n")
TABLE = ("| Variant | Result |\n|---|---|\n| tiled 64x64 with smem staging | 1.4x over eager, correct |\n"
         "| one thread per output element | failed correctness on the tail |\n")
PROSE = ("The kernel is memory bound on the H100, and the tensor cores do not help at all. Fusing the softmax into "
         "the matmul gave 2.1x over eager.\n\nNext time, try a persistent kernel with one CTA per SM.\n")


def _claims(text: str) -> list[str]:
    return [c.text for c in segment(text)]


# --- hand-written SKILL.md --------------------------------------------------------------------------------------

def test_the_hand_written_texts_segment_as_the_tests_assume() -> None:
    assert _claims(BULLETS) == ["Use 128-thread blocks for the row reduction.", "Accumulate the partial sums in fp32",
                                "cast to bf16 only at the final store.", "Vectorised loads gave 2.1x over eager."]
    assert len(_claims(NUMBERED)) == 3 and len(_claims(TABLE)) == 2
    assert _claims(PROSE)[:2] == ["The kernel is memory bound on the H100", "and the tensor cores do not help at all."]


@pytest.mark.parametrize("text, drop, expected", [
    (BULLETS, {0}, "# Notes\n\n- Accumulate the partial sums in fp32; cast to bf16 only at the final store.\n"
                   "- Vectorised loads gave 2.1x over eager.\n"),
    (BULLETS, {1}, "# Notes\n\n- Use 128-thread blocks for the row reduction.\n"
                   "- cast to bf16 only at the final store.\n- Vectorised loads gave 2.1x over eager.\n"),
    (BULLETS, {2}, "# Notes\n\n- Use 128-thread blocks for the row reduction.\n- Accumulate the partial sums in fp32.\n"
                   "- Vectorised loads gave 2.1x over eager.\n"),
    (BULLETS, {1, 2}, "# Notes\n\n- Use 128-thread blocks for the row reduction.\n"
                      "- Vectorised loads gave 2.1x over eager.\n"),
    (NUMBERED, {0, 2}, "## What worked\n\n2. Accumulate the partial sums in fp32 and cast once at the store.\n\n"
                       "Good luck.\n"),
    (NUMBERED, {0, 1, 2}, "## What worked\n\nGood luck.\n"),
    (TABLE, {0}, "| Variant | Result |\n|---|---|\n"
                 "| one thread per output element | failed correctness on the tail |\n"),
    (TABLE, {0, 1}, "| Variant | Result |\n|---|---|\n"),
    (PROSE, {1}, "The kernel is memory bound on the H100. Fusing the softmax into the matmul gave 2.1x over eager.\n\n"
                 "Next time, try a persistent kernel with one CTA per SM.\n"),
    (PROSE, {0, 3}, "and the tensor cores do not help at all. Fusing the softmax into the matmul gave 2.1x over "
                    "eager.\n"),
    (PROSE, {2}, "The kernel is memory bound on the H100, and the tensor cores do not help at all.\n\n"
                 "Next time, try a persistent kernel with one CTA per SM.\n"),
])
def test_remove_claims_cuts_them_and_tidies_only_where_it_cut(text: str, drop: set[int], expected: str) -> None:
    assert remove_claims(text, segment(text), drop) == expected


def test_an_empty_edit_returns_the_text_byte_identical() -> None:
    for text in (BULLETS, NUMBERED, TABLE, PROSE, "", "no claims here\n"):
        claims = segment(text)
        assert remove_claims(text, claims, set()) is text
        assert remove_claims(text, claims, {99}) is text   # an index the text does not have cuts nothing
        assert mark_claims(text, claims, frozenset()) is text
        assert trim_to_length(text, len(text)) is text


def test_remove_keeps_the_characters_of_claims_it_does_not_drop() -> None:
    text = BULLETS + "\n" + PROSE
    claims = segment(text)
    for k in range(len(claims)):
        out = remove_claims(text, claims, {k})
        assert claims[k].text not in out
        assert all(c.text in out for c in claims if c.index != k)
        assert "  " not in out and "\n\n\n" not in out


@pytest.mark.parametrize("text, mark, expected", [
    (BULLETS, {0, 1}, "# Notes\n\n- Use 128-thread blocks for the row reduction." + LABEL + "\n"
                      "- Accumulate the partial sums in fp32" + LABEL + "; cast to bf16 only at the final store.\n"
                      "- Vectorised loads gave 2.1x over eager.\n"),
    (NUMBERED, {2}, NUMBERED.replace("for this op.", "for this op." + LABEL)),
    (TABLE, {1}, TABLE.replace("on the tail |", "on the tail" + LABEL + " |")),
    (PROSE, {0, 1}, "The kernel is memory bound on the H100" + LABEL + ", and the tensor cores do not help at all."
                    + LABEL + " Fusing the softmax into the matmul gave 2.1x over eager.\n\n"
                    "Next time, try a persistent kernel with one CTA per SM.\n"),
])
def test_mark_claims_puts_the_label_right_after_each_marked_span(text: str, mark: set[int], expected: str) -> None:
    assert mark_claims(text, segment(text), mark) == expected
    assert mark_claims(text, segment(text), mark, label="[?]").count(" [?]") == len(mark)


@pytest.mark.parametrize("text, max_chars, expected", [
    (BULLETS, 100, "# Notes\n\n- Use 128-thread blocks for the row reduction.\n"
                   "- Accumulate the partial sums in fp32\n"),
    (BULLETS, 70, "# Notes\n\n- Use 128-thread blocks for the row reduction.\n"),
    (BULLETS, 40, "# Notes\n\n- Use 128-thread blocks for\n"),   # the first claim is longer: cut at a blank
    (NUMBERED, 100, "## What worked\n\n1. Submission 1 failed correctness because of a race on the tail.\n"),
    (TABLE, 100, "| Variant | Result |\n|---|---|\n| tiled 64x64 with smem staging | 1.4x over eager, correct |\n"),
    (PROSE, 100, "The kernel is memory bound on the H100, and the tensor cores do not help at all.\n"),
    (PROSE, 5, "The\n"),
    (PROSE, 0, ""),
])
def test_trim_to_length_ends_at_a_claim_or_a_line(text: str, max_chars: int, expected: str) -> None:
    assert trim_to_length(text, max_chars) == expected


def test_trim_drops_an_unclosed_comment_or_code_fence() -> None:
    text = ("# Notes\n\n- Use 128-thread blocks for the row reduction.\n<!-- a note that goes on and on -->\n"
            "```python\nx = 1\ny = 2\n```\n- Vectorised loads gave 2.1x over eager.\n")
    assert trim_to_length(text, 80) == "# Notes\n\n- Use 128-thread blocks for the row reduction.\n"
    # Cut at the end of `y = 2`: the open fence goes from where it opened.
    assert trim_to_length(text, 115) == ("# Notes\n\n- Use 128-thread blocks for the row reduction.\n"
                                         "<!-- a note that goes on and on -->\n")
    lead_in = "It is worth knowing that <!-- a note --> the tail needs a guard when 128 does not divide the length.\n"
    assert trim_to_length(lead_in, 34) == "It is worth knowing that\n"   # the cut fell inside the comment
    assert trim_to_length(lead_in, 50) == "It is worth knowing that <!-- a note --> the tail\n"


# --- synthetic SKILL.md: every edit still parses -----------------------------------------------------------------

def _synthetic_skills() -> list[tuple[str, str]]:
    """(label, text) of synthetic skills in every layout and both phrasings, fresh and evolved claims."""
    out = []
    for phrasing, base in (("plain", SkillLayout()), ("styled", STYLED_TEXT)):
        for name in LAYOUTS:
            layout = base.model_copy(update={other: float(other == name) for other in LAYOUTS})
            spec = SyntheticSpec(initial_claims_mean=12, layout=layout)
            for seed in range(8):
                claims = fresh_claims(spec, random.Random(seed), ClaimContext("h0-s", "synthetic/attention_0"))
                if seed % 2:
                    claims = evolve(claims, spec, random.Random(seed), ClaimContext("h1-s", "synthetic/moe_0"))
                text = render_skill(claims, attempt="a", tier="pass", rng=random.Random(seed), layout=layout)
                if text:
                    out.append((f"{phrasing}/{name}/{seed}", text))
    return out


def test_synthetic_skills_stay_parseable_after_every_edit() -> None:
    rng = random.Random(29)
    skills = _synthetic_skills()
    assert len(skills) >= 50
    for label, text in skills:
        claims = segment(text)
        truth = parse_skill(text)
        bodies = [(c.body_start, c.body_end) for c in _synthetic_comments(text)]
        for _ in range(3):
            chosen = {c.index for c in claims if rng.random() < 0.4}
            removed = remove_claims(text, claims, chosen)
            # A synthetic claim survives (comment and text) exactly when no dropped claim overlaps its words (its
            # final period aside: a joined claim gives it up to the joiner).
            hit = {t.claim_id for t, (b0, b1) in zip(truth, bodies) if b1 is not None
                   and any(c.index in chosen and c.start < b1 - 1 and c.end > b0 for c in claims)}
            assert [c.claim_id for c in parse_skill(removed)] == [t.claim_id for t in truth if t.claim_id not in hit], \
                label
            plain = strip_ground_truth(removed)
            assert all(c.text in plain for c in claims if c.index not in chosen), label
            assert "  " not in plain and "\n\n\n" not in removed, label
            marked = mark_claims(text, claims, chosen)
            assert parse_skill(marked) == truth, label
            assert marked.count(UNVERIFIED_LABEL) == len(chosen)
            unlabelled = strip_ground_truth(marked).replace(LABEL, "").replace(UNVERIFIED_LABEL + " ", "")
            assert unlabelled == strip_ground_truth(text), label
            max_chars = rng.randrange(40, len(text))
            trimmed = trim_to_length(text, max_chars)
            assert len(trimmed) <= max_chars
            kept = parse_skill(trimmed)   # must not raise; whole claims before the cut keep their ground truth
            assert [c.claim_id for c in kept] == [t.claim_id for t in truth[:len(kept)]], label


# --- the verification gate ---------------------------------------------------------------------------------------

def _verdict(tier: str, speedup: Optional[float] = None, rejected_by: Optional[str] = None,
             reason: str = "") -> Verdict:
    passed = tier in ("pass", "pass2x")
    return Verdict(problem_id="level1/01_softmax", source_hash="0" * 64, dsl="tirx", device="cuda",
                   preset="production", seed=0, compiled=True, executed=True, correct=passed, tier=tier,
                   kernel_ms=0.5 if passed else None, eager_ms=1.05 if passed else None, speedup=speedup,
                   rejected_by=rejected_by, reason=reason)


def _record(verdicts: list[Verdict], final: Optional[Verdict], synthetic: bool = False) -> AttemptRecord:
    submissions = [SubmissionRecord(index=k, counted=True, verdict=v, submitted_at=NOW, attempt_clock_s=10.0 * k)
                   for k, v in enumerate(verdicts, 1)]
    return AttemptRecord(config=AttemptConfig(problem_id="level1/01_softmax", dsl="tirx", model="m",
                                              out_dir=Path("attempts/a")),
                         status="completed", stop_reason="finished", synthetic=synthetic, template_hash="t" * 64,
                         model="m", submissions=submissions, final_verdict=final, started_at=NOW, finished_at=NOW)


FAILED = _verdict("fail", rejected_by="correctness", reason="max abs error 0.5 exceeds the allowance\nat index 7")
PASSED = _verdict("pass2x", speedup=2.1, reason="correct; 2.10x over eager")
GATE_SKILL = ("# Notes\n\n- Vectorised bf16 loads gave 2.1x over eager.\n"
              "- Tensor cores cannot beat eager for this op.\n- The L2 is 50 MB on the H100.\n")


def test_the_gate_keeps_supported_claims_and_removes_the_rest() -> None:
    record = _record([FAILED, PASSED], PASSED)
    result = gate_skill(GATE_SKILL, record, "remove")
    assert result.text == "# Notes\n\n- Vectorised bf16 loads gave 2.1x over eager.\n"
    assert (result.kept, result.removed, result.marked, result.gated) == (1, 2, 0, 2)
    assert [(r.index, r.support) for r in result.reasons] == [(0, "supported"), (1, "contradicted"),
                                                              (2, "unsupported")]
    assert "2.10x" in result.reasons[1].reason


def test_the_gate_marks_instead_in_mark_mode() -> None:
    result = gate_skill(GATE_SKILL, _record([FAILED, PASSED], PASSED), "mark")
    assert result.text == ("# Notes\n\n- Vectorised bf16 loads gave 2.1x over eager.\n"
                           "- Tensor cores cannot beat eager for this op." + LABEL + "\n"
                           "- The L2 is 50 MB on the H100." + LABEL + "\n")
    assert (result.kept, result.removed, result.marked) == (1, 0, 2)


def test_the_gate_without_evidence_gates_everything_and_rejects_a_bad_mode() -> None:
    result = gate_skill(GATE_SKILL, None, "remove")
    assert result.kept == 0 and result.removed == 3 and result.text == "# Notes\n"
    only_failed = gate_skill(GATE_SKILL, _record([FAILED], FAILED), "mark")
    assert only_failed.kept == 0 and only_failed.marked == 3
    supported = "# Notes\n\n- Vectorised bf16 loads gave 2.1x over eager.\n"
    assert gate_skill(supported, _record([PASSED], PASSED), "remove").text is supported
    with pytest.raises(ValueError, match="gate mode"):
        gate_skill(GATE_SKILL, None, "drop")  # type: ignore[arg-type]


# --- the episodic hand-off ---------------------------------------------------------------------------------------

def _transcript(replies: list[str]) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [{"event": "message", "role": "system", "content": "rules"},
                                   {"event": "message", "role": "user", "content": "def reference(x): ..."}]
    for k, reply in enumerate(replies, 1):
        lines += [{"event": "message", "role": "assistant", "content": reply, "turn": k},
                  {"event": "submission", "index": k, "counted": True},
                  {"event": "message", "role": "user", "content": f"Submission {k} judged"}]
    return lines + [{"event": "final", "tier": "pass2x"}]


KERNEL_REPLY = "One thread per row first.\n```python\n" + "\n".join(f"line_{k} = {k}" for k in range(12)) + "\n```"


def test_episodic_text_small_case() -> None:
    record = _record([FAILED, PASSED], PASSED)
    assert episodic_text(record, _transcript([KERNEL_REPLY, "Guard the tail."]), 10_000) == (
        "# Episodes from a previous attempt\n\n"
        "## Submission 1: fail\n"
        "Rejected by correctness: max abs error 0.5 exceeds the allowance\n"
        "The reply before it:\n"
        "> One thread per row first.\n> ```python\n> line_0 = 0\n> line_1 = 1\n> line_2 = 2\n> line_3 = 3\n"
        "> line_4 = 4\n> … (7 more lines)\n> ```\n\n"
        "## Submission 2: pass2x, 2.10x over eager\n"
        "Verdict: correct; 2.10x over eager\n"
        "The reply before it:\n"
        "> Guard the tail.\n\n"
        "## Final verdict: pass2x, 2.10x over eager\n"
        "Verdict: correct; 2.10x over eager\n")
    # Without a transcript, and for a synthetic record: verdict lines only.
    verdicts_only = episodic_text(record, None, 10_000)
    assert "The reply before it" not in verdicts_only and verdicts_only.count("## ") == 3
    assert episodic_text(_record([FAILED, PASSED], PASSED, synthetic=True), _transcript(["a", "b"]),
                         10_000) == verdicts_only


def test_episodic_text_of_an_empty_record_is_empty() -> None:
    assert episodic_text(_record([], None), None, 10_000) == ""
    no_final = episodic_text(_record([FAILED], None), None, 10_000)
    assert no_final.endswith("## Final verdict: none\nNo final kernel was judged (the attempt stopped: finished).\n")


def test_episodic_text_fits_the_budget_excerpts_first_then_oldest_entries() -> None:
    verdicts = [FAILED] * 9 + [PASSED]
    replies = [f"Attempt {k}: " + "try a wider tile and see. " * 40 + "\n" + KERNEL_REPLY for k in range(10)]
    record, transcript = _record(verdicts, PASSED), _transcript(replies)
    full = episodic_text(record, transcript, 1_000_000)
    assert "line_4 = 4" in full and "line_5 = 5" not in full and "def reference" not in full
    for max_chars in (5_000, 2_000, 1_200, 600, 300, 120, 30):
        out = episodic_text(record, transcript, max_chars)
        assert 0 < len(out) <= max_chars
        assert out.startswith(EPISODES_TITLE[:max_chars])
        if max_chars >= 300:
            assert "## Final verdict: pass2x" in out
    # Excerpts shrink evenly before any entry is dropped: at 5,000 every submission is still there, each excerpt cut.
    shrunk = episodic_text(record, transcript, 5_000)
    assert all(f"## Submission {k}:" in shrunk for k in range(1, 11)) and shrunk.count("The reply before it") == 10
    assert shrunk.count(" …") == 10
    # Then the oldest entries go, and the note says so.
    dropped = episodic_text(record, transcript, 600)
    assert "## Submission 1:" not in dropped and "## Submission 10:" in dropped and "left out for length" in dropped
