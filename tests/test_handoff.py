"""What an intervention trial is handed (campaign/handoff.py), read from a real run store, and how the trial task
treats it (an identical hand-off is not run; a budget-matched solo gets the extra budget)."""
from __future__ import annotations

import json

import pytest

from mkb_ray.campaign.config import ExperimentConfig
from mkb_ray.agents.context import CHARS_PER_TOKEN
from mkb_ray.campaign.handoff import HandOffBuilder, needs_hand_off
from mkb_ray.campaign.plan import plan_campaign
from mkb_ray.campaign.reconcile import record_plan
from mkb_ray.campaign.trial_task import HAND_OFF_ARTIFACT, TrialContext, _budget_json, execute_trial
from mkb_ray.claims.segment import segment
from mkb_ray.interventions import EPISODES_TITLE
from mkb_ray.models.roster import load_roster
from mkb_ray.records import AttemptRecord, BudgetSpec, HandOff
from mkb_ray.store import RunStore
from mkb_ray.synthetic import SyntheticSpec, synthetic_outcome

SPEC = SyntheticSpec(seed=7, initial_claims_mean=8, empty_skill_prob=0.0, llm_error_prob=0.0)


@pytest.fixture()
def run(tmp_path):
    """A synthetic plan with one twin of each kind, its solos and skill arms stored (drawn by the generator)."""
    config = ExperimentConfig(name="h", models=["smollm2"], problems={"synthetic": 12}, synthetic=SPEC.model_dump(),
                              interventions=[{"kind": "claim_ablation", "claims": 1},
                                             {"kind": "placebo"}, {"kind": "budget_matched_solo"},
                                             {"kind": "episodic"}, {"kind": "verification_gate", "mode": "remove"}])
    plan = plan_campaign(config, None, load_roster(), has_gpu=True)
    store = RunStore(tmp_path / "run")
    record_plan(store, plan.trials)
    done = [t for t in plan.trials if t.kind == "benchmark"]
    outcomes = []
    for trial in done:
        source = next((o.skill_md for o in outcomes if o.trial_id == trial.skill_from), None)
        outcomes.append(synthetic_outcome(trial, source, SPEC))
    store.write_outcomes(outcomes)
    yield plan, store, config
    store.close()


def test_each_hand_off_from_the_store(run):
    plan, store, config = run
    builder = HandOffBuilder.for_config(store, config)
    prefix = "smollm2/synthetic/attention_0/r0/"
    source = store.skill_text(prefix + "solo_cutedsl")
    assert source and len(segment(source)) > 2

    ablation = plan.by_id(prefix + "cutedsl2tirx_skill~ablate-claim0")
    assert needs_hand_off(ablation) and not needs_hand_off(plan.by_id(prefix + "cutedsl2tirx_skill"))
    hand = builder.build(ablation, source)
    first = segment(source)[0]
    assert first.text not in hand.text and len(segment(hand.text)) < len(segment(source))
    assert hand.identical_to is None and "claim 0 of" in hand.note

    placebo = plan.by_id(prefix + "cutedsl2tirx_skill~placebo")
    donor = store.skill_text(placebo.skill_from)
    hand = builder.build(placebo, donor)
    assert placebo.skill_from == "smollm2/synthetic/attention_1/r0/solo_cutedsl"
    assert 0 < len(hand.text) <= len(source.strip()) and donor.startswith(hand.text.split("\n", 1)[0])

    episodic = builder.build(plan.by_id(prefix + "cutedsl2tirx_skill~episodic"), source)
    assert episodic.text.startswith(EPISODES_TITLE) and len(episodic.text) <= len(source.strip())

    gated = builder.build(plan.by_id(prefix + "cutedsl2tirx_skill~gate-remove"), source)
    assert "verification gate (remove)" in gated.note
    assert (gated.identical_to is None) == (gated.text.strip() != source.strip())

    # The budget-matched solo: per LLM call of the control, latency x the skill's share of the call's tokens.
    record = AttemptRecord.model_validate_json(store.record_json(prefix + "cutedsl2tirx_skill"))
    skill_tokens = int(len(source.strip()) / CHARS_PER_TOKEN)
    expected = sum(c.usage.latency_s * min(1.0, skill_tokens / (c.usage.prompt_tokens + c.usage.completion_tokens))
                   for c in record.llm_calls)
    budget = builder.build(plan.by_id(prefix + "cutedsl2tirx_skill~budget_solo"), "")
    assert budget.text == "" and budget.extra_wall_s == pytest.approx(expected, abs=1e-3) and expected > 0
    assert budget.extra_tokens == skill_tokens * len(record.llm_calls)


def test_an_identical_hand_off_is_stored_skipped_and_a_budget_twin_gets_more_budget(run):
    plan, store, config = run
    trial = plan.by_id("smollm2/synthetic/attention_0/r0/cutedsl2tirx_skill~gate-remove")
    ctx = TrialContext(budget_json=BudgetSpec(wall_clock_s=100, tokens=1000).model_dump_json(), agent="chat",
                       synthetic_json=SPEC.model_dump_json())
    outcome = execute_trial(trial, HandOff("text", note="n", identical_to="x/control"), ctx)
    record = AttemptRecord.model_validate_json(outcome.record_json)
    assert (outcome.status, record.stop_reason, outcome.skill_md) == ("skipped", "identical_hand_off", "")
    assert any("x/control" in note for note in record.notes)
    # A changed hand-off is drawn by the generator, and what it read is kept as an artifact.
    drawn = execute_trial(trial, HandOff("# a skill\n\n- Use 128 threads.\n", note="gate note"), ctx)
    assert drawn.artifacts[HAND_OFF_ARTIFACT] == b"# a skill\n\n- Use 128 threads.\n"
    assert "gate note" in AttemptRecord.model_validate_json(drawn.record_json).notes
    extended = json.loads(_budget_json(ctx, HandOff("", extra_wall_s=12.5, extra_tokens=300)))
    assert (extended["wall_clock_s"], extended["tokens"]) == (112.5, 1300)
    assert _budget_json(ctx, HandOff("")) == ctx.budget_json
