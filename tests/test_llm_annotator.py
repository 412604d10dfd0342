"""The LLM annotator against scripted models: valid, wrapped, wrong, partial and never-valid replies and endpoint
errors. Whatever the model sends, every claim comes back exactly once, in order, labelled or `unannotated` with the
reason; support is the evidence's verdict (`judge_support`), never the model's."""
from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any, ClassVar, Iterator

import pytest

from mkb_ray.claims import llm_annotator
from mkb_ray.claims.llm_annotator import (PROMPT_SHA256, LLMAnnotator, PromptError, first_json_object, parse_reply,
                                          render_system_prompt)
from mkb_ray.claims.support import judge_support
from mkb_ray.claims.taxonomy import load_taxonomy
from mkb_ray.llm import LLMClient, ScriptedReply
from mkb_ray.records.claims import ClaimRecord, EvidenceItem

from refused_port import refused_port
from scripted_llm import Recorder

TAXONOMY = load_taxonomy("mkb-11")
SKILL_SHA = "ab" * 32
CLAIM_TEXTS = [
    ("The vectorised kernel ran at 0.031 ms, about 3x faster than eager.", "Results"),
    ("The recurrence cannot be folded algebraically; keep the eager loop.", "What not to try"),
    ("Submission 1 failed to compile because the block size was a Python int.", ""),
    ("A persistent kernel might beat one launch per row.", "Next"),
    ("In TIRx the buffer shape is declared in the prim_func signature.", ""),
]
# Right labels for CLAIM_TEXTS, 1-based as the model numbers them.
LABELS = {1: ("performance_evidence", "plain"), 2: ("unsupported_closure", "absolute"),
          3: ("bounded_failure_diagnosis", "plain"), 4: ("open_question", "hedged"),
          5: ("dsl_specific_detail", "plain")}
EVIDENCE = [
    EvidenceItem(submission=1, compiled=False, correct=None, tier="fail", rejected_by="compile",
                 reason="compile error: block size must be a compile-time constant"),
    EvidenceItem(submission=2, compiled=True, correct=True, tier="pass2x", speedup=3.03, kernel_ms=0.031,
                 eager_ms=0.094, reason="correct; 3.03x over eager"),
]


def claims(n: int = len(CLAIM_TEXTS)) -> list[ClaimRecord]:
    out, position = [], 0
    for i, (text, section) in enumerate(CLAIM_TEXTS[:n]):
        out.append(ClaimRecord(claim_id=f"{SKILL_SHA[:16]}.{i:03d}", skill_sha=SKILL_SHA, index=i, text=text,
                               start=position, end=position + len(text), section=section))
        position += len(text) + 1
    return out


def answer(numbers: Any, **overrides: tuple[str, str]) -> str:
    """The JSON a good model sends for claims `numbers`; `overrides` (n<number>=(category, modality)) change one."""
    entries = []
    for n in numbers:
        category, modality = overrides.get(f"n{n}", LABELS[n])
        entries.append({"index": n, "category": category, "modality": modality})
    return json.dumps({"annotations": entries})


def spec() -> SimpleNamespace:
    return SimpleNamespace(name="scripted", litellm_id="openai/scripted", context_length=1_000_000,
                           supports_tools=False, num_gpus=0, max_output_tokens=None, prices=None)


def annotator(replies: list[ScriptedReply], **options: Any) -> tuple[LLMAnnotator, Recorder]:
    script = Recorder(replies)
    client = LLMClient(spec(), script=script, retry_backoff_s=0.0, max_retries=0)
    return LLMAnnotator(client, TAXONOMY, **options), script


def check_one_record_per_claim(records: list, given: list[ClaimRecord]) -> None:
    assert [r.claim_id for r in records] == [c.claim_id for c in given]
    for record, claim in zip(records, given):
        judgement = judge_support(claim.text, EVIDENCE)  # support is the evidence's call, whatever the model said
        assert (record.support, record.support_reason) == (judgement.support, judgement.reason)
        assert record.annotator == "llm:scripted:v1" and record.taxonomy == "mkb-11@1"
        if record.status == "annotated":
            assert record.category in TAXONOMY.names and record.modality and not record.reason
        else:
            assert record.category is None and record.modality is None and record.reason


def labels_of(records: list) -> dict[int, tuple[str, str]]:
    return {i + 1: (r.category, r.modality) for i, r in enumerate(records) if r.status == "annotated"}


# -- the prompt ------------------------------------------------------------------------------------------------
def test_prompt_lists_the_taxonomy_the_modalities_and_the_numbered_claims():
    annotator_, script = annotator([ScriptedReply(answer(LABELS))])
    records = annotator_.annotate(claims(), EVIDENCE)
    check_one_record_per_claim(records, claims())
    assert labels_of(records) == LABELS and len(script.seen) == 1
    system, user = script.seen[0][0]["content"], script.seen[0][1]["content"]
    assert system == annotator_.system_prompt and "mkb-11@1" in system
    for category in TAXONOMY.categories:
        assert f"- {category.name}: {' '.join(category.definition.split())}" in system
        assert all(json.dumps(example) in system for example in category.examples)
    for modality in ("hedged", "plain", "absolute"):
        assert f"- {modality}:" in system
    assert "support" not in system.split("## Reply")[1]  # the model is never asked for support
    assert '1. The vectorised kernel ran at 0.031 ms, about 3x faster than eager. (under the heading "Results")' \
        in user
    assert "\n5. In TIRx the buffer shape is declared in the prim_func signature." in user
    assert annotator_.system_prompt_sha256 == hashlib.sha256(system.encode()).hexdigest()
    assert len(annotator_.usage) == 1


def test_a_users_taxonomy_file_changes_the_prompt_and_the_names_accepted(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text("name: tiny\nversion: 3\nclosure_category: closure\ncategories:\n"
                    "  - name: closure\n    definition: Says a direction is closed, with no evidence.\n"
                    "    examples: [\"Never fuse these.\", \"Do not bother with shared memory.\"]\n"
                    "  - name: other\n    definition: Anything that does not close a direction.\n"
                    "    examples: [\"The row is 4096 wide.\", \"It passed in bf16.\"]\n")
    tiny = load_taxonomy(str(path))
    reply = json.dumps({"annotations": [{"index": 1, "category": "closure", "modality": "absolute"},
                                        {"index": 2, "category": "unsupported_closure", "modality": "absolute"}]})
    client = LLMClient(spec(), script=[ScriptedReply(reply)], retry_backoff_s=0.0, max_retries=0)
    records = LLMAnnotator(client, tiny, max_retries=0).annotate(claims(2), EVIDENCE)
    system = render_system_prompt(tiny)
    assert "tiny@3" in system and "- closure: Says a direction is closed" in system
    assert "unsupported_closure" not in system and "workload_census" not in system
    assert records[0].category == "closure" and records[0].taxonomy == "tiny@3"
    assert records[1].status == "unannotated" and "'unsupported_closure' is not a name of taxonomy tiny@3" \
        in records[1].reason


def test_the_prompt_template_is_pinned_by_its_hash(tmp_path, monkeypatch):
    template = (llm_annotator.PROMPT_DIR / "annotate-v1.md").read_text()
    assert hashlib.sha256(template.encode()).hexdigest() == PROMPT_SHA256["v1"]
    (tmp_path / "annotate-v1.md").write_text(template.replace("exactly once", "once"))
    monkeypatch.setattr(llm_annotator, "PROMPT_DIR", tmp_path)
    with pytest.raises(PromptError, match="changed"):
        render_system_prompt(TAXONOMY)
    with pytest.raises(PromptError, match="no annotation prompt 'v9'"):
        render_system_prompt(TAXONOMY, "v9")


# -- replies ---------------------------------------------------------------------------------------------------
def test_a_reply_wrapped_in_prose_and_fences_is_read():
    wrapped = (f"Sure! Here are the labels {{for each claim}}:\n\n```json\n{answer(LABELS)}\n```\n"
               'Let me know if you want {"more": "detail"}.')
    annotator_, script = annotator([ScriptedReply(wrapped)])
    records = annotator_.annotate(claims(), EVIDENCE)
    check_one_record_per_claim(records, claims())
    assert labels_of(records) == LABELS and len(script.seen) == 1


def test_a_wrong_category_is_retried_with_the_reason_and_fixed():
    annotator_, script = annotator([ScriptedReply(answer(LABELS, n2=("closure", "absolute"))),
                                    ScriptedReply(answer([2]))])
    records = annotator_.annotate(claims(), EVIDENCE)
    check_one_record_per_claim(records, claims())
    assert labels_of(records) == LABELS and len(script.seen) == 2
    feedback = script.feedback_after(1)
    assert "'closure' is not a name of taxonomy mkb-11@1" in feedback
    # Only the claim still unlabelled is asked again, under its own number; the bad reply is in the context.
    assert "2. The recurrence cannot be folded" in feedback and "1. The vectorised" not in feedback
    assert script.seen[1][-2] == {"role": "assistant", "content": answer(LABELS, n2=("closure", "absolute"))}


def test_a_never_valid_reply_leaves_every_claim_unannotated_with_the_reason():
    annotator_, script = annotator([ScriptedReply("I am not able to label these claims.")] * 3, max_retries=2)
    records = annotator_.annotate(claims(), EVIDENCE)
    check_one_record_per_claim(records, claims())
    assert len(script.seen) == 3  # the first try and max_retries=2 more
    assert all(r.status == "unannotated" for r in records)
    assert all("after 3 replies" in r.reason and "no JSON object" in r.reason for r in records)
    assert "contains no JSON object" in script.feedback_after(2)


def test_missing_indices_are_asked_again_and_those_never_given_are_unannotated():
    annotator_, script = annotator([ScriptedReply(answer([1, 2, 5])), ScriptedReply(answer([3])),
                                    ScriptedReply(answer([3]))], max_retries=2)
    records = annotator_.annotate(claims(), EVIDENCE)
    check_one_record_per_claim(records, claims())
    assert labels_of(records) == {n: LABELS[n] for n in (1, 2, 3, 5)}
    assert records[3].status == "unannotated" and "index 4 is missing from the reply" in records[3].reason
    assert "index 3 is missing" in script.feedback_after(1) and "index 4 is missing" in script.feedback_after(1)
    assert "index 3" not in script.feedback_after(2) and "4. A persistent kernel" in script.feedback_after(2)


def test_bad_entries_are_refused_one_by_one():
    numbers = [1, 2, 3, 4, 5]
    reply = {"annotations": [
        {"index": 1, "category": "performance_evidence", "modality": "plain", "why": "a measured time"},  # extra ok
        {"index": 2, "category": "unsupported_closure", "modality": "certain"},  # not a modality
        {"index": 3, "category": "bounded_failure_diagnosis", "modality": "plain"},
        {"index": 3, "category": "verification_recipe", "modality": "plain"},  # twice, disagreeing
        {"index": 4, "category": "open_question", "modality": "hedged"},
        {"index": 4, "category": " Open-Question", "modality": "Hedged"},  # twice, the same: harmless
        {"index": 9, "category": "open_question", "modality": "hedged"},  # not asked for
        {"category": "dsl_specific_detail", "modality": "plain"},  # no index
    ]}
    parsed = parse_reply(json.dumps(reply), numbers, TAXONOMY)
    assert sorted(parsed.labels) == [1, 4] and parsed.labels[4].category == "open_question"
    assert "modality" in parsed.problems[2] and "more than once" in parsed.problems[3]
    assert "missing" in parsed.problems[5]
    assert any("index 9 is not one of the claims" in p for p in parsed.general)
    assert any("index" in p and "Field required" in p for p in parsed.general)
    cut = parse_reply('{"annotations": [{"index": 1, "categ', [1], TAXONOMY, truncated=True)
    assert "cut off at the token limit" in cut.problems[1]
    assert "no \"annotations\" list" in parse_reply('{"labels": []}', [1], TAXONOMY).problems[1]
    assert first_json_object("no json {here} but [1, 2] and {\"a\": {\"b\": 1}} then {\"c\": 2}") == {"a": {"b": 1}}


def test_batches_are_numbered_from_one_and_keep_the_claims_order():
    annotator_, script = annotator([ScriptedReply(answer([1, 2])), ScriptedReply(answer([1, 2], n1=LABELS[3],
                                                                                          n2=LABELS[4])),
                                    ScriptedReply(answer([1], n1=LABELS[5]))], batch_size=2)
    records = annotator_.annotate(claims(), EVIDENCE)
    check_one_record_per_claim(records, claims())
    assert labels_of(records) == LABELS and len(script.seen) == 3
    assert script.seen[2][1]["content"] == "Claims:\n1. In TIRx the buffer shape is declared in the prim_func " \
                                           "signature."


# -- endpoint errors -------------------------------------------------------------------------------------------
def test_an_endpoint_error_leaves_the_batch_unannotated_without_raising():
    annotator_, _ = annotator([ScriptedReply(answer([1, 2])), ScriptedReply(error="upstream exploded"),
                               ScriptedReply(answer([1], n1=LABELS[5]))], batch_size=2)
    records = annotator_.annotate(claims(), EVIDENCE)
    check_one_record_per_claim(records, claims())
    assert labels_of(records) == {n: LABELS[n] for n in (1, 2, 5)}  # the other batches are unaffected
    assert all("LLM call 1 failed" in r.reason and "upstream exploded" in r.reason for r in records[2:4])


def test_an_unreachable_server_leaves_every_claim_unannotated():
    # A loopback port bound by this test and never listened on: the connection is refused at once.
    with refused_port() as port:
        client = LLMClient(spec(), f"http://127.0.0.1:{port}/v1", timeout_s=20, max_retries=0)
        records = LLMAnnotator(client, TAXONOMY).annotate(claims(), EVIDENCE)
    check_one_record_per_claim(records, claims())
    assert all(r.status == "unannotated" and "(connection)" in r.reason for r in records)


class _Endpoint(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint on loopback that answers from a list (an int: that HTTP error)."""

    replies: ClassVar[list[Any]] = []
    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        self.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        reply = self.replies.pop(0)
        if isinstance(reply, int):
            payload, status = {"error": {"message": "the engine died", "type": "server_error"}}, reply
        else:
            status = 200
            payload = {"id": "x", "object": "chat.completion", "created": 0, "model": "scripted",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": reply}}],
                       "usage": {"prompt_tokens": 900, "completion_tokens": 80, "total_tokens": 980}}
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    _Endpoint.replies, _Endpoint.bodies = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_over_http_a_fenced_reply_and_a_server_error(endpoint):
    _Endpoint.replies = [f"```json\n{answer([1, 2])}\n```", 500]
    client = LLMClient(spec(), endpoint, timeout_s=20, max_retries=0, retry_backoff_s=0.0)
    annotator_ = LLMAnnotator(client, TAXONOMY, batch_size=2)
    records = asyncio.run(annotator_.aannotate(claims(4), EVIDENCE))  # from inside an event loop
    check_one_record_per_claim(records, claims(4))
    assert labels_of(records) == {1: LABELS[1], 2: LABELS[2]}
    assert all("failed" in r.reason and "the engine died" in r.reason for r in records[2:])
    first = _Endpoint.bodies[0]
    assert first["model"] == "scripted" and first["temperature"] == 0.0
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert annotator_.usage[0].prompt_tokens == 900 and annotator_.usage[0].completion_tokens == 80


# -- a real model ----------------------------------------------------------------------------------------------
# Not written: serving SmolLM2 here means Ray plus vLLM's CPU engine (tests/test_end_to_end.py gives its start-up
# 900 s), far over the minute this file may spend. `mkb lineage RUN --annotator smollm2` is where it runs for real.
