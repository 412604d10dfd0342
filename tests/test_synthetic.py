"""Synthetic mode: deterministic, valid, labelled records whose draws match the spec they came from."""
from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from mkb_ray.records import Trial
from mkb_ray.records import AttemptRecord
from mkb_ray.synthetic import (ClaimContext, SyntheticClaim, SyntheticSpec, evolve, fresh_claims, parse_skill,
                               render_skill, strip_ground_truth, synthetic_outcome, tier_probabilities)
from mkb_ray.synthetic.claims import TEMPLATES, claim_text, skill_source_tier
from mkb_ray.synthetic.spec import CATEGORIES, MODALITIES, EvolutionRates, TierProbs

PROBLEM = "synthetic/attention_0"


def hop_trial(hop: int, chain: int = 0, dsl: str = "tirx", model: str = "m") -> Trial:
    base = f"{model}/{PROBLEM}/chain{chain}"
    if hop == 0:
        return Trial(trial_id=f"{base}/h0", model=model, problem_id=PROBLEM, dsl=dsl, target="gpu", arm="solo",
                     kind="chain_hop", chain=chain, hop=0)
    return Trial(trial_id=f"{base}/h{hop}", model=model, problem_id=PROBLEM, dsl=dsl, target="gpu", arm="skill",
                 kind="chain_hop", chain=chain, hop=hop, skill_from=f"{base}/h{hop - 1}")


def solo_trial(k: int, dsl: str = "tirx", target: str = "gpu") -> Trial:
    return Trial(trial_id=f"m/{PROBLEM}/r{k}/solo_{dsl}", model="m", problem_id=PROBLEM, dsl=dsl, target=target,
                 arm="solo", kind="benchmark", replicate=k, arm_name=f"solo_{dsl}", problem_hash="ph",
                 template_hash="th")


def source_skill(spec: SyntheticSpec) -> str:
    return synthetic_outcome(hop_trial(0), None, spec).skill_md or ""


# --- determinism --------------------------------------------------------------------------------------------------

def test_same_seed_and_id_give_identical_outcomes() -> None:
    spec = SyntheticSpec(seed=7)
    src = source_skill(spec)
    a, b = (synthetic_outcome(hop_trial(1), src, spec) for _ in range(2))
    assert a == b
    assert synthetic_outcome(hop_trial(1), src, SyntheticSpec(seed=7)) == a
    other_id = synthetic_outcome(hop_trial(1, chain=1), src, spec)
    other_seed = synthetic_outcome(hop_trial(1), src, SyntheticSpec(seed=8))
    assert other_id.record_json != a.record_json and other_id.skill_md != a.skill_md
    assert other_seed.record_json != a.record_json


# --- records ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("trial", [hop_trial(1), solo_trial(0), solo_trial(1, dsl="cutedsl"),
                                   solo_trial(2, target="cpu")], ids=["skill", "solo", "cutedsl", "cpu"])
def test_record_is_a_valid_labelled_attempt_record(trial: Trial) -> None:
    spec = SyntheticSpec()
    out = synthetic_outcome(trial, source_skill(spec) if trial.arm == "skill" else None, spec)
    assert out.status == "completed" and out.synthetic and out.error is None
    record = AttemptRecord.model_validate_json(out.record_json or "")
    # The hand-built JSON is exactly pydantic's own dump of the record: every field present, none extra.
    assert record.model_dump(mode="json") == json.loads(out.record_json or "")
    assert record.synthetic and record.status == "completed"
    assert any("synthetic" in note for note in record.notes)
    assert record.model == trial.model and record.config.attempt_id == trial.trial_id
    assert record.config.out_dir == Path(".") and record.config.arm == trial.arm
    assert record.config.dsl == trial.dsl and record.config.target == trial.target
    assert (record.problem_hash, record.template_hash) == ((trial.problem_hash or None), trial.template_hash)
    assert 1 <= record.counted_submissions <= spec.submissions_budget
    assert record.turns >= record.counted_submissions and len(record.llm_calls) == record.turns + 1
    assert record.prompt_tokens == sum(c.usage.prompt_tokens for c in record.llm_calls) > 0
    for sub in record.submissions:
        v = sub.verdict
        assert v is not None and v.reason == "synthetic draw" and v.timing_method == "synthetic"
        assert v.device == ("cuda" if trial.target == "gpu" else "cpu") and v.problem_id == trial.problem_id
        assert v.passed == (v.tier != "fail") and (v.speedup is None) == (v.tier == "fail")
    final = record.final_verdict
    assert final is not None and final.tier == out.final_tier
    assert set(out.artifacts) == {"SKILL.md", "final_kernel.py"}
    kernel = out.artifacts["final_kernel.py"]
    assert b"SYNTHETIC" in kernel and final.source_hash == hashlib.sha256(kernel).hexdigest()
    skill_bytes = out.artifacts["SKILL.md"]
    assert skill_bytes.decode() == out.skill_md and record.skill_md_bytes == len(skill_bytes)
    assert "synthetic" in (out.skill_md or "") and parse_skill(out.skill_md)
    if trial.arm == "skill":
        assert record.skill_source_sha256 and record.config.skill_path is not None


def test_tier_and_speedup_are_consistent() -> None:
    spec = SyntheticSpec()
    for k in range(200):
        record = AttemptRecord.model_validate_json(synthetic_outcome(solo_trial(k), None, spec).record_json or "")
        for sub in record.submissions:
            v = sub.verdict
            assert v is not None
            if v.tier == "pass":
                assert v.correct and spec.pass_speedup_min * 0.999 <= (v.speedup or 0) < 2
            elif v.tier == "pass2x":
                assert v.correct and (v.speedup or 0) >= 2
            else:
                assert v.rejected_by in ("compile", "correctness") and not v.correct
        # Earlier submissions never beat the final kernel.
        rank = {"fail": 0, "pass": 1, "pass2x": 2}
        assert all(rank[s.verdict.tier] <= rank[record.final_verdict.tier]  # type: ignore[union-attr]
                   for s in record.submissions)


def test_skill_trial_with_empty_source_is_skipped() -> None:
    spec = SyntheticSpec()
    for src in (None, "", "  \n"):
        out = synthetic_outcome(hop_trial(3), src, spec)
        assert out.status == "skipped" and out.synthetic and out.final_tier is None and out.skill_md == ""
        record = AttemptRecord.model_validate_json(out.record_json or "")
        assert record.synthetic and record.status == "skipped" and record.stop_reason == "empty_source_skill"
        assert not record.submissions and record.final_verdict is None
    assert synthetic_outcome(solo_trial(0), None, spec).status == "completed"


def test_unhappy_paths_are_valid_records() -> None:
    out = synthetic_outcome(solo_trial(0), None, SyntheticSpec(llm_error_prob=1.0))
    record = AttemptRecord.model_validate_json(out.record_json or "")
    assert out.status == record.status == "error" and record.stop_reason == "llm_error" and record.synthetic
    assert out.final_tier is None and out.skill_md == "" and out.error and "synthetic" in out.error
    empty = synthetic_outcome(hop_trial(0), None, SyntheticSpec(empty_skill_prob=1.0))
    assert empty.status == "completed" and empty.skill_md == ""
    assert synthetic_outcome(hop_trial(1), empty.skill_md, SyntheticSpec()).status == "skipped"


# --- calibration --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dsl", ["tirx", "cutedsl"])
def test_solo_tier_frequencies_match_the_spec(dsl: str) -> None:
    spec = SyntheticSpec(seed=3)
    n = 2000
    counts = Counter(synthetic_outcome(solo_trial(k, dsl=dsl), None, spec).final_tier for k in range(n))
    probs = spec.tiers.get(dsl, "solo")
    for tier, p in (("fail", probs.fail), ("pass", probs.pass_), ("pass2x", probs.pass2x)):
        assert abs(counts[tier] / n - p) < 0.04, (tier, counts)


def test_skill_effect_follows_the_closure_share_and_source_tier() -> None:
    spec = SyntheticSpec(skill_help_shift=0.0, source_pass_shift=0.3, closure_harm_per_share=1.0)
    claims = [SyntheticClaim(f"h0-x.{k:02d}", None, cat, "plain",
                             claim_text(cat, 0, "plain", (("dsl", "TIRx"), ("op", "op"))), "new", 0,
                             (("dsl", "TIRx"), ("op", "op")))
              for k, cat in enumerate(["unsupported_closure", "dsl_specific_detail"] * 5)]
    assert len(parse_skill(render_skill(claims))) == 10
    base = spec.tiers.get("tirx", "skill")
    # closure share 0.5, source failed: delta = -0.5, half of the passing mass moves to fail.
    harmed = tier_probabilities(spec, "tirx", "skill", closure_share=0.5)
    assert harmed.pass_ == pytest.approx(base.pass_ / 2)
    assert harmed.fail == pytest.approx(base.fail + 0.5 * (1 - base.fail))
    # source passed: delta = 0.3 - 0.5 = -0.2.
    assert tier_probabilities(spec, "tirx", "skill", closure_share=0.5, source_passed=True).pass2x == \
        pytest.approx(base.pass2x * 0.8)
    assert tier_probabilities(spec, "tirx", "solo", closure_share=0.5) == spec.tiers.get("tirx", "solo")
    n = 2000
    for tier, expected in ((None, harmed), ("pass", tier_probabilities(spec, "tirx", "skill", closure_share=0.5,
                                                                     source_passed=True))):
        src = render_skill(claims, attempt="src", tier=tier)
        counts = Counter(synthetic_outcome(hop_trial(1, chain=c), src, spec).final_tier for c in range(n))
        assert abs(counts["fail"] / n - expected.fail) < 0.04, (tier, counts, expected)
        assert abs(counts["pass"] / n - expected.pass_) < 0.04, (tier, counts, expected)


def test_generator_self_check_evolution_rates_of_a_long_chain() -> None:
    """The generator against its own spec: the lineage read back here is the ground truth the generator wrote into
    each SKILL.md (parent ids and edges), so this checks the draws, not a lineage recovery. The real recovery
    test (lineage inferred from the claim texts alone) comes with the lineage issue."""
    spec = SyntheticSpec(seed=11, evolution=EvolutionRates(drop_rate=0.1, mutate_rate=0.2, strengthen_rate=0.15,
                                                           weaken_rate=0.1, new_claims_per_hop=2.0))
    hops: list[list[SyntheticClaim]] = []
    skill: str | None = None
    for hop in range(300):
        out = synthetic_outcome(hop_trial(hop), skill, spec)
        assert out.status == "completed"
        skill = out.skill_md
        hops.append(parse_skill(skill))
    edges: Counter[str] = Counter()
    by_mod: dict[str, Counter[str]] = {m: Counter() for m in MODALITIES}
    new_per_hop = []
    for parents, children in zip(hops, hops[1:]):
        by_id = {p.claim_id: p for p in parents}
        fate = {p.claim_id: "dropped" for p in parents}
        new_per_hop.append(sum(c.parent_id is None for c in children))
        for c in children:
            if c.parent_id is None:
                assert c.edge == "new"
                continue
            p = by_id[c.parent_id]
            assert fate[p.claim_id] == "dropped", "a parent has one child at most"
            fate[p.claim_id] = c.edge
            assert c.category == p.category
            step = MODALITIES.index(c.modality) - MODALITIES.index(p.modality)
            assert step == {"copied": 0, "paraphrased": 0, "strengthened": 1, "weakened": -1}[c.edge]
            assert (c.text == p.text) == (c.edge == "copied")
        for p in parents:
            edges[fate[p.claim_id]] += 1
            by_mod[p.modality][fate[p.claim_id]] += 1
    total = sum(edges.values())
    ev = spec.evolution
    assert total > 2000
    assert abs(edges["dropped"] / total - ev.drop_rate) < 0.03
    assert abs(edges["paraphrased"] / total - ev.mutate_rate) < 0.03
    plain = sum(by_mod["plain"].values())
    assert abs(by_mod["plain"]["copied"] / plain - ev.copy_rate) < 0.04
    not_absolute = plain + sum(by_mod["hedged"].values())
    strengthened = by_mod["plain"]["strengthened"] + by_mod["hedged"]["strengthened"]
    assert abs(strengthened / not_absolute - ev.strengthen_rate) < 0.03
    not_hedged = plain + sum(by_mod["absolute"].values())
    weakened = by_mod["plain"]["weakened"] + by_mod["absolute"]["weakened"]
    assert abs(weakened / not_hedged - ev.weaken_rate) < 0.03
    assert by_mod["absolute"]["strengthened"] == by_mod["hedged"]["weakened"] == 0
    assert abs(sum(new_per_hop) / len(new_per_hop) - ev.new_claims_per_hop) < 0.3


def test_evolve_is_deterministic_given_the_rng() -> None:
    spec = SyntheticSpec()
    ctx = ClaimContext("h0-a", PROBLEM, "cutedsl")
    parents = fresh_claims(spec, random.Random(1), ctx)
    child_ctx = ClaimContext("h1-b", PROBLEM, "tirx")
    assert evolve(parents, spec, random.Random(2), child_ctx) == evolve(parents, spec, random.Random(2), child_ctx)
    assert all(c.claim_id.startswith("h1-b.") for c in evolve(parents, spec, random.Random(2), child_ctx))


# --- SKILL.md -----------------------------------------------------------------------------------------------------

def test_render_parse_roundtrip_and_stripping() -> None:
    spec = SyntheticSpec(initial_claims_mean=40)
    for family in ("attention_0", "kv_cache_1", "moe_0", "unknown_family_3"):
        claims = fresh_claims(spec, random.Random(5), ClaimContext("h0-r", f"synthetic/{family}", "tirx"))
        child = evolve(claims, spec, random.Random(6), ClaimContext("h1-r", f"synthetic/{family}", "cutedsl"))
        for batch in (claims, child):
            text = render_skill(batch, attempt="a/b/c", tier="pass")
            assert parse_skill(text) == batch
            assert skill_source_tier(text) == "pass"
            plain = strip_ground_truth(text)
            assert "<!--" not in plain and "claim:" not in plain
            assert [line[2:] for line in plain.splitlines() if line.startswith("- ")] == [c.text for c in batch]
    assert render_skill([]) == "" and parse_skill("") == [] and parse_skill(None) == []
    assert parse_skill("# notes\n- a bullet someone wrote by hand\n") == []
    assert skill_source_tier("no header") is None


def test_every_template_renders_in_every_modality() -> None:
    assert set(TEMPLATES) == set(CATEGORIES)
    slots = (("axis", "row"), ("dsl", "TIRx"), ("dtype", "bf16"), ("hw", "sm_90a"), ("n", "128"), ("op", "op"),
             ("pct", "20"), ("x", "1.5"))
    for cat, wordings in TEMPLATES.items():
        assert len(wordings) >= 2, cat
        for k in range(len(wordings)):
            texts = {claim_text(cat, k, m, slots) for m in MODALITIES}
            assert len(texts) == 3 and all("{" not in t and "\n" not in t and "-->" not in t for t in texts)


# --- the spec -----------------------------------------------------------------------------------------------------

def test_spec_validation_errors_name_the_field() -> None:
    cases = [
        ({"bogus": 1}, "bogus"),
        ({"evolution": {"drop_rate": 1.5}}, "drop_rate"),
        ({"evolution": {"drop_rate": 0.5, "mutate_rate": 0.4, "strengthen_rate": 0.2}}, "drop_rate + mutate_rate"),
        ({"evolution": {"copy_rate": 0.5}}, "copy_rate"),
        ({"tiers": {"tirx_solo": {"fail": 0.5, "pass": 0.4, "pass2x": 0.4}}}, "fail + pass + pass2x"),
        ({"tiers": {"tirx_solo": {"fail": 0.5, "pass": 0.5}}}, "pass2x"),
        ({"category_weights": {"open_question": -1}}, "open_question"),
        ({"attempt_wall_s_median": 0}, "attempt_wall_s_median"),
        ({"llm_error_prob": 2}, "llm_error_prob"),
    ]
    for data, needle in cases:
        with pytest.raises(ValidationError) as err:
            SyntheticSpec.model_validate(data)
        assert needle in str(err.value), (data, str(err.value))


def test_spec_roundtrips_through_its_yaml_shape() -> None:
    spec = SyntheticSpec.model_validate({"seed": 4, "tiers": {"tirx_skill": {"fail": 0.7, "pass": 0.2,
                                                                               "pass2x": 0.1}}})
    assert spec.tiers.tirx_skill.pass_ == 0.2 and spec.tiers.tirx_solo == SyntheticSpec().tiers.tirx_solo
    dumped = spec.model_dump()
    assert dumped["tiers"]["tirx_skill"] == {"fail": 0.7, "pass": 0.2, "pass2x": 0.1}
    assert SyntheticSpec.model_validate(dumped) == spec
    ev = SyntheticSpec().evolution
    assert ev.copy_rate == pytest.approx(1 - ev.drop_rate - ev.mutate_rate - ev.strengthen_rate - ev.weaken_rate)
    assert TierProbs(fail=1, pass_=0, pass2x=0).fail == 1
