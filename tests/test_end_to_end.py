"""The real thing on this CPU: SmolLM2-135M served by vLLM (CPU backend) under Ray Serve LLM through ModelServer,
the chat agent on the CPU-target TIRx variant (its kernels executed and judged), a SKILL.md written, and a
skill-conditioned attempt fed from it. SmolLM2 mostly fails to write a passing kernel: the test asserts that the
attempt ran and was recorded honestly, not that the model succeeded."""
from __future__ import annotations

import json
import time

import pytest

from mkb_ray.attempt import load_record
from mkb_ray.attempt_cli import attempt_main

from conftest import EXAMPLE_PROBLEM

BUDGET = {"submissions": 3, "wall_clock_s": 300, "max_turns": 6, "reply_max_tokens": 512}


@pytest.fixture(scope="module")
def smollm2_endpoint():
    from mkb_ray.actors.model_server import make_model_server
    from mkb_ray.models.local_ray import init_local_ray
    from mkb_ray.models.roster import get_model

    started = init_local_ray(num_cpus=4)
    import ray

    server = make_model_server(get_model("smollm2"))
    began = time.monotonic()
    info = ray.get(server.start.remote(), timeout=900)
    info["startup_s"] = time.monotonic() - began
    yield info
    ray.get(server.stop.remote(), timeout=300)
    if started:
        ray.shutdown()


@pytest.mark.slow
def test_solo_then_skill_attempt_with_a_real_model(smollm2_endpoint, tmp_path):
    api_base = smollm2_endpoint["api_base"]
    solo_dir, skill_dir = tmp_path / "solo", tmp_path / "skill"
    began = time.monotonic()
    code = attempt_main(EXAMPLE_PROBLEM, "tirx", "smollm2", solo_dir, agent="chat", target="cpu", device="cpu",
                        api_base=api_base, budget_overrides=BUDGET, seed=1)
    solo_s = time.monotonic() - began
    solo = load_record(solo_dir)
    assert code == 0 and solo.status == "completed", (solo.stop_reason, solo.error)
    assert solo.config.arm == "solo" and solo.config.target == "cpu" and solo.model == "smollm2"
    assert solo.endpoint == api_base and not solo.synthetic and solo.template_hash and solo.problem_hash
    # Real model calls, with their usage recorded.
    assert solo.llm_calls and solo.completion_tokens > 0 and solo.prompt_tokens > 0
    assert all(call.usage.latency_s > 0 for call in solo.llm_calls)
    # Every counted submission was judged on the CPU target; the final kernel was judged once more.
    assert solo.counted_submissions <= BUDGET["submissions"]
    for submission in solo.submissions:
        if submission.counted:
            assert submission.verdict is not None and submission.verdict.device == "cpu"
    # The roster opens a ```python fence for SmolLM2 (reply_prefill), so every kernel turn yields code: at least one
    # of its kernels must have been judged for real on the CPU, and its final kernel judged once more. Whether it
    # passes is the model's business (it almost never does).
    judged = [s for s in solo.submissions if s.counted]
    assert judged, "SmolLM2 produced no judged kernel"
    assert all(s.verdict.device == "cpu" and s.verdict.reason for s in judged)
    assert solo.final_verdict is not None and solo.final_verdict.dsl == "tirx"
    assert (solo_dir / "final_kernel.py").exists()
    assert (solo_dir / "record.json").exists() and (solo_dir / "transcript.jsonl").exists()
    skill_text = (solo_dir / "SKILL.md").read_text()
    assert skill_text.strip(), "the solo attempt wrote no SKILL.md"

    code = attempt_main(EXAMPLE_PROBLEM, "tirx", "smollm2", skill_dir, agent="chat", target="cpu", device="cpu",
                        api_base=api_base, skill=solo_dir / "SKILL.md", budget_overrides=BUDGET, seed=2)
    skilled = load_record(skill_dir)
    assert code == 0 and skilled.status == "completed", (skilled.stop_reason, skilled.error)
    assert skilled.config.arm == "skill" and skilled.skill_source_sha256
    first_events = [json.loads(line) for line in (skill_dir / "transcript.jsonl").read_text().splitlines()][:5]
    contents = [e["content"] for e in first_events if isinstance(e.get("content"), str)]
    assert any(skill_text.strip()[:200] in content for content in contents), \
        "the source SKILL.md is not in the skill attempt's first messages"
    print(f"\nsmollm2 endpoint up in {smollm2_endpoint['startup_s']:.0f} s; solo attempt {solo_s:.0f} s: "
          f"{solo.counted_submissions} submissions, final verdict "
          f"{solo.final_verdict.tier + ' ' + str(solo.final_verdict.rejected_by) if solo.final_verdict else None}; "
          f"skill attempt {skilled.counted_submissions} submissions")
