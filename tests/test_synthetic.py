"""Synthetic mode: deterministic, valid, labelled records whose draws match the spec they came from, and SKILL.md
texts whose ground-truth lineage is what the spec planted."""
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
from mkb_ray.synthetic.claims import EDGES, IDEAS, claim_text, mergeable_pairs
from mkb_ray.synthetic.skill_md import skill_source_tier
from mkb_ray.synthetic.spec import (CATEGORIES, LAYOUTS, MODALITIES, STYLED_TEXT, EvolutionRates, SkillLayout,
                                    TierProbs)
from mkb_ray.synthetic.wordings import WORDINGS
from mkb_ray.synthetic.wordings_styled import LEAD_INS

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
                assert v.correct and 0 < (v.speedup or 0) < 2
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


VALUES = {"axis": "row dimension", "dsl": "TIRx", "dtype": "bf16", "hw": "sm_90a", "n": "128", "op": "fused add",
          "pct": "20", "x": "1.5"}


def make_claim(claim_id: str, category: str, idea: str, modality: str = "plain", variant: int = 0,
               values: dict[str, str] = VALUES, parents: tuple[str, ...] = (), edge: str = "new") -> SyntheticClaim:
    slots = tuple((name, values[name]) for name in IDEAS[(category, idea)].slots)
    return SyntheticClaim(claim_id, parents, category, modality, idea, variant, slots,  # type: ignore[arg-type]
                          claim_text(category, idea, variant, modality, slots), edge)  # type: ignore[arg-type]


def test_skill_effect_follows_the_closure_share_and_source_tier() -> None:
    spec = SyntheticSpec(skill_help_shift=0.0, source_pass_shift=0.3, closure_harm_per_share=1.0)
    claims = [make_claim(f"h0-x.{k:02d}", cat, WORDINGS[cat][k // 2].key)
              for k, cat in enumerate(["unsupported_closure", "dsl_specific_detail"] * 3)]
    claims += [make_claim(f"h0-x.{k + 6:02d}", cat, WORDINGS[cat][0].key, values={**VALUES, "n": "64"})
               for k, cat in enumerate(["unsupported_closure", "dsl_specific_detail"] * 2)]
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
        src = render_skill(claims, attempt="src", tier=tier, rng=random.Random(3))
        counts = Counter(synthetic_outcome(hop_trial(1, chain=c), src, spec).final_tier for c in range(n))
        assert abs(counts["fail"] / n - expected.fail) < 0.04, (tier, counts, expected)
        assert abs(counts["pass"] / n - expected.pass_) < 0.04, (tier, counts, expected)


# --- ground truth over a long chain ------------------------------------------------------------------------------

_STEP = {"copied": 0, "paraphrased": 0, "strengthened": 1, "weakened": -1, "split": 0}


def _check_child(c: SyntheticClaim, parents: list[SyntheticClaim]) -> None:
    """A child's ground truth is what its edge says it is."""
    p = parents[0]
    assert c.category == p.category
    if c.edge == "merged":
        assert len(parents) == 2 and set(IDEAS[(c.category, c.idea)].parts) == {q.idea for q in parents}
        assert c.modality == MODALITIES[min(MODALITIES.index(q.modality) for q in parents)]
        assert dict(c.slots) == {**dict(parents[0].slots), **dict(parents[1].slots)}
        return
    assert len(parents) == 1
    assert MODALITIES.index(c.modality) - MODALITIES.index(p.modality) == _STEP[c.edge]
    assert (c.text == p.text) == (c.edge == "copied")
    if c.edge == "split":
        assert c.idea in IDEAS[(p.category, p.idea)].parts and set(c.slots) <= set(p.slots)
        return
    assert (c.idea, c.slots) == (p.idea, p.slots)
    assert (c.variant != p.variant) == (c.edge == "paraphrased")


def test_planted_rates_are_what_the_ground_truth_of_long_chains_shows() -> None:
    """The generator against its own spec, through the full path (outcome → SKILL.md text → parse_skill → evolve):
    the lineage read back is the ground truth written into each SKILL.md, so this checks the draws and that every
    edge is honest (a copy is verbatim, a paraphrase another phrasing of the same idea, ...), not a recovery."""
    ev = EvolutionRates(drop_rate=0.10, mutate_rate=0.20, strengthen_rate=0.12, weaken_rate=0.08, split_rate=0.15,
                        merge_rate=0.30, new_claims_per_hop=3.0, reorder_prob=0.3)
    spec = SyntheticSpec(seed=11, initial_claims_mean=30, evolution=ev)
    fates: Counter[str] = Counter()
    by_kind: dict[str, Counter[str]] = {k: Counter() for k in ("hedged", "plain", "absolute", "compound", "simple",
                                                                "plain_simple")}
    pairs = merged_pairs = 0
    new_per_hop: list[int] = []
    sizes: list[int] = []
    for chain in range(3):
        skill: str | None = None
        parents: list[SyntheticClaim] = []
        for hop in range(100):
            out = synthetic_outcome(hop_trial(hop, chain=chain), skill, spec)
            assert out.status == "completed"
            skill = out.skill_md or ""
            children = parse_skill(skill)
            plain_text = strip_ground_truth(skill)
            assert all(c.text in plain_text for c in children)
            sizes.append(len(children))
            if hop == 0:
                parents = children
                continue
            by_id = {p.claim_id: p for p in parents}
            fate: dict[str, str] = {}
            for c in children:
                assert c.edge in EDGES and (c.edge == "new") == (not c.parent_ids)
                for pid in c.parent_ids:
                    assert fate.get(pid, c.edge) == c.edge, "a parent takes one transition"
                    fate[pid] = c.edge
                if c.parent_ids:
                    _check_child(c, [by_id[pid] for pid in c.parent_ids])
            assert sum(c.edge == "split" for c in children) == 2 * sum(f == "split" for f in fate.values())
            new_per_hop.append(sum(c.edge == "new" for c in children))
            mergeable = mergeable_pairs(parents)
            pairs += len(mergeable)
            merged_pairs += sum(fate.get(parents[pair.first].claim_id) == "merged" for pair in mergeable)
            assert sum(f == "merged" for f in fate.values()) == 2 * sum(c.edge == "merged" for c in children)
            for p in parents:
                f = fate.get(p.claim_id, "dropped")
                if f == "merged":
                    continue
                fates[f] += 1
                by_kind[p.modality][f] += 1
                compound = bool(IDEAS[(p.category, p.idea)].parts)
                by_kind["compound" if compound else "simple"][f] += 1
                if p.modality == "plain" and not compound:
                    by_kind["plain_simple"][f] += 1
            parents = children
    total = sum(fates.values())
    assert total > 6000 and pairs > 300, (total, pairs)

    def rate(counter: Counter[str], edge: str) -> float:
        return counter[edge] / sum(counter.values())

    not_absolute = by_kind["hedged"] + by_kind["plain"]
    not_hedged = by_kind["plain"] + by_kind["absolute"]
    observed = {
        "drop": (fates["dropped"] / total, ev.drop_rate),
        "paraphrase": (fates["paraphrased"] / total, ev.mutate_rate),
        "strengthen": (rate(not_absolute, "strengthened"), ev.strengthen_rate),
        "weaken": (rate(not_hedged, "weakened"), ev.weaken_rate),
        "split": (rate(by_kind["compound"], "split"), ev.split_rate),
        # a plain simple claim is copied when drawn to be, and when a split is drawn for it
        "copy": (rate(by_kind["plain_simple"], "copied"), ev.copy_rate + ev.split_rate),
        "merge": (merged_pairs / pairs, ev.merge_rate),
    }
    for name, (got, want) in observed.items():
        assert abs(got - want) < (0.05 if name == "merge" else 0.03), (name, got, want, observed)
    assert by_kind["absolute"]["strengthened"] == by_kind["hedged"]["weakened"] == by_kind["simple"]["split"] == 0
    assert abs(sum(new_per_hop) / len(new_per_hop) - ev.new_claims_per_hop) < 0.3
    assert 15 <= sum(sizes) / len(sizes) <= 45


# --- evolution, one transition at a time -------------------------------------------------------------------------

def _only(**rates: float) -> SyntheticSpec:
    names = ("drop_rate", "mutate_rate", "strengthen_rate", "weaken_rate", "split_rate", "merge_rate",
             "new_claims_per_hop", "reorder_prob")
    return SyntheticSpec(evolution=EvolutionRates(**{**dict.fromkeys(names, 0.0), **rates}))


def _all_ideas() -> list[SyntheticClaim]:
    return [make_claim(f"h0-a.{k:03d}", cat, key, modality=MODALITIES[k % 3], variant=k % 2)
            for k, (cat, key) in enumerate(IDEAS)]


CTX = ClaimContext("h1-b", PROBLEM, "tirx")


def test_paraphrase_keeps_idea_modality_and_values_and_changes_the_text() -> None:
    parents = _all_ideas()
    children = evolve(parents, _only(mutate_rate=1.0), random.Random(0), CTX)
    assert len(children) == len(parents)
    for p, c in zip(parents, children):
        assert c.edge == "paraphrased" and c.parent_ids == (p.claim_id,)
        assert (c.category, c.idea, c.modality, c.slots) == (p.category, p.idea, p.modality, p.slots)
        assert c.variant != p.variant and c.text != p.text


@pytest.mark.parametrize("edge", ["strengthened", "weakened"])
def test_strengthen_and_weaken_move_one_step_in_the_same_phrasing(edge: str) -> None:
    parents = _all_ideas()
    spec = _only(strengthen_rate=1.0) if edge == "strengthened" else _only(weaken_rate=1.0)
    stuck = "absolute" if edge == "strengthened" else "hedged"
    for p, c in zip(parents, evolve(parents, spec, random.Random(0), CTX)):
        assert (c.idea, c.variant, c.slots) == (p.idea, p.variant, p.slots)
        if p.modality == stuck:
            assert c.edge == "copied" and c.text == p.text
        else:
            step = 1 if edge == "strengthened" else -1
            assert c.edge == edge and MODALITIES.index(c.modality) == MODALITIES.index(p.modality) + step
            assert c.text != p.text


def test_split_gives_each_part_with_the_parent_listed() -> None:
    parents = _all_ideas()
    children = evolve(parents, _only(split_rate=1.0), random.Random(0), CTX)
    compounds = [p for p in parents if IDEAS[(p.category, p.idea)].parts]
    assert len(compounds) == len(WORDINGS) and len(children) == len(parents) + len(compounds)
    for p in parents:
        kids = [c for c in children if c.parent_ids == (p.claim_id,)]
        parts = IDEAS[(p.category, p.idea)].parts
        if not parts:
            assert [k.edge for k in kids] == ["copied"]
            continue
        assert [k.edge for k in kids] == ["split", "split"] and tuple(k.idea for k in kids) == parts
        for k in kids:
            assert k.modality == p.modality and k.category == p.category
            assert dict(k.slots) == {n: dict(p.slots)[n] for n in IDEAS[(k.category, k.idea)].slots}
            assert k.text in strip_ground_truth(render_skill(kids, rng=random.Random(1)))


def test_merge_joins_the_two_parts_and_lists_both_parents() -> None:
    cat = "verified_reformulation"
    a = make_claim("h0-a.00", cat, "fp32_accumulate", modality="absolute")
    other = make_claim("h0-a.01", "open_question", "persistent_kernel")
    b = make_claim("h0-a.02", cat, "cast_once", modality="hedged", variant=1)
    children = evolve([a, other, b], _only(merge_rate=1.0), random.Random(0), CTX)
    assert [c.edge for c in children] == ["merged", "copied"]
    merged = children[0]
    assert merged.parent_ids == ("h0-a.00", "h0-a.02") and merged.idea == "fp32_accumulate+cast_once"
    assert merged.modality == "hedged" and dict(merged.slots) == {"op": VALUES["op"], "dtype": VALUES["dtype"]}
    assert "fp32" in merged.text and VALUES["dtype"] in merged.text
    # Not mergeable: the parts disagree on a shared value, or the compound already stands with those values.
    b_other_op = make_claim("h0-a.02", cat, "cast_once", values={**VALUES, "op": "SiLU-and-mul"})
    assert mergeable_pairs([a, b_other_op]) == []
    both = make_claim("h0-a.03", cat, "fp32_accumulate+cast_once")
    assert mergeable_pairs([a, b, both]) == []
    assert [p[:2] for p in mergeable_pairs([a, other, b])] == [(0, 2)]
    # Without merges, each part takes its own transition.
    assert [c.edge for c in evolve([a, other, b], _only(), random.Random(0), CTX)] == ["copied"] * 3


def test_claims_do_not_keep_their_parents_order() -> None:
    parents = _all_ideas()
    kept = evolve(parents, _only(), random.Random(0), CTX)
    assert [c.parent_ids[0] for c in kept] == [p.claim_id for p in parents]
    moved = evolve(parents, _only(reorder_prob=0.3), random.Random(0), CTX)
    order = [c.parent_ids[0] for c in moved]
    assert sorted(order) == [p.claim_id for p in parents] and order != sorted(order)
    assert [c.claim_id for c in moved] == [f"h1-b.{k:02d}" for k in range(len(moved))]
    # New claims go anywhere, not only at the end.
    spec = _only(new_claims_per_hop=5.0)
    positions = [k for seed in range(20) for k, c in enumerate(evolve(parents, spec, random.Random(seed), CTX))
                 if c.edge == "new"]
    assert min(positions) < len(parents) // 2


def test_new_claims_do_not_repeat_an_idea_of_the_skill() -> None:
    """A skill of the default size says each idea once, and never a compound beside one of its parts (so a split
    never makes a duplicate); only a skill near the ~40 ideas' capacity repeats an idea, with other values."""
    spec = SyntheticSpec(initial_claims_mean=12)
    for seed in range(50):
        claims = fresh_claims(spec, random.Random(seed), ClaimContext("h0-r", PROBLEM, "tirx"))
        said = [(c.category, c.idea) for c in claims]
        assert len(set(said)) == len(said)
        assert not any((c.category, part) in said for c in claims for part in IDEAS[(c.category, c.idea)].parts)
    repeats = born = 0
    for chain in range(3):
        parents = fresh_claims(SyntheticSpec(), random.Random(chain), ClaimContext("h0", PROBLEM, "tirx"))
        for hop in range(1, 40):
            parents = evolve(parents, SyntheticSpec(), random.Random(100 * chain + hop),
                             ClaimContext(f"h{hop}", PROBLEM, "tirx"))
            old = {(c.category, c.idea) for c in parents if c.edge != "new"}
            new = [(c.category, c.idea) for c in parents if c.edge == "new"]
            born += len(new)
            repeats += sum(idea in old for idea in new)
    assert born > 100 and repeats / born < 0.02, (repeats, born)


def test_evolve_and_render_are_deterministic_given_the_rng() -> None:
    spec = SyntheticSpec()
    ctx = ClaimContext("h0-a", PROBLEM, "cutedsl")
    parents = fresh_claims(spec, random.Random(1), ctx)
    child_ctx = ClaimContext("h1-b", PROBLEM, "tirx")
    assert evolve(parents, spec, random.Random(2), child_ctx) == evolve(parents, spec, random.Random(2), child_ctx)
    assert all(c.claim_id.startswith("h1-b.") for c in evolve(parents, spec, random.Random(2), child_ctx))
    texts = {render_skill(parents, attempt="a", tier="pass", rng=random.Random(4), layout=spec.layout)
             for _ in range(3)}
    assert len(texts) == 1


# --- SKILL.md -----------------------------------------------------------------------------------------------------

def _layout(text: str) -> str:
    return text.split("layout:", 1)[1].split(" ", 1)[0]


def test_render_parse_roundtrip_and_stripping_in_every_layout() -> None:
    spec = SyntheticSpec(initial_claims_mean=30)
    seen: set[str] = set()
    for family in ("attention_0", "kv_cache_1", "moe_0", "unknown_family_3"):
        claims = fresh_claims(spec, random.Random(5), ClaimContext("h0-r", f"synthetic/{family}", "tirx"))
        child = evolve(claims, spec, random.Random(6), ClaimContext("h1-r", f"synthetic/{family}", "cutedsl"))
        for batch in (claims, child):
            for seed in range(12):
                text = render_skill(batch, attempt="a/b/c", tier="pass", rng=random.Random(seed),
                                    layout=spec.layout)
                seen.add(_layout(text))
                parsed = parse_skill(text)
                assert sorted(parsed, key=lambda c: c.claim_id) == batch
                if _layout(text) != "sections":  # sections group claims by heading; the others keep the order
                    assert parsed == batch
                assert skill_source_tier(text) == "pass"
                plain = strip_ground_truth(text)
                assert "<!--" not in plain and "-->" not in plain and "claim:" not in plain
                assert "\n\n\n" not in plain and "  " not in plain and not plain.startswith("\n")
                assert all(line == line.rstrip() for line in plain.splitlines())
                assert all(c.text in plain for c in batch)
                assert plain.startswith("# ") and plain.endswith("\n") and not plain.endswith("\n\n")
    assert seen == set(LAYOUTS) - {"table"}   # the table is styled text's (weight 0 by default)
    assert render_skill([]) == "" and parse_skill("") == [] and parse_skill(None) == []
    assert parse_skill("# notes\n- a bullet someone wrote by hand\n\nSome prose. More prose.\n") == []
    assert skill_source_tier("no header") is None


def test_styled_text_round_trips_with_lead_ins_joined_claims_and_tables() -> None:
    """Styled text (issue 26): five phrasings per idea, claims behind lead-ins, pairs joined in one sentence, tables,
    more boilerplate; the ground truth still reads back exactly and stripping leaves no trace of it."""
    spec = SyntheticSpec(initial_claims_mean=30, layout=STYLED_TEXT)
    claims = fresh_claims(spec, random.Random(1), ClaimContext("h0-s", PROBLEM, "tirx"))
    seen: set[str] = set()
    variants: set[int] = set()
    led = joined = 0
    for hop in range(1, 25):
        claims = evolve(claims, spec, random.Random(hop), ClaimContext(f"h{hop}-s", PROBLEM, "cutedsl"))
        variants.update(c.variant for c in claims)
        text = render_skill(claims, rng=random.Random(100 + hop), layout=spec.layout)
        seen.add(_layout(text))
        assert sorted(parse_skill(text), key=lambda c: c.claim_id) == claims
        plain = strip_ground_truth(text)
        assert "<!--" not in plain and "claim:" not in plain and "  " not in plain
        for c in claims:   # each claim's words are there, whole or as the first half of a joined pair
            assert c.text[1:-1] in plain, c.text
        led += sum(plain.count(f"{lead} ") for lead in LEAD_INS)
        joined += sum(plain.count(joiner) for joiner in ("; ", ", and ", " — "))
        if _layout(text) == "table":
            assert "| # | Note |" in plain
    assert seen == set(LAYOUTS) and max(variants) >= 2 and led > 24 and joined > 24
    # Plain text never draws the styled phrasings, so runs made before styled text existed keep their texts.
    plain_claims = fresh_claims(SyntheticSpec(initial_claims_mean=60), random.Random(1), ClaimContext("p", PROBLEM))
    assert all(c.variant < IDEAS[(c.category, c.idea)].plain_count for c in plain_claims)
    # A lower-cased first letter is read back; a changed word is not.
    text = render_skill(claims, rng=random.Random(7), layout=spec.layout.model_copy(update={"lead_in_share": 1.0}))
    assert len(parse_skill(text)) == len(claims)
    with pytest.raises(ValueError, match="ground-truth text"):
        parse_skill(text.replace(claims[0].text[1:-1], claims[0].text[1:-1] + " indeed", 1))


def test_layouts_vary_across_seeds_and_follow_their_weights() -> None:
    claims = fresh_claims(SyntheticSpec(initial_claims_mean=20), random.Random(0), ClaimContext("h0", PROBLEM))
    texts = [render_skill(claims, rng=random.Random(seed), layout=SkillLayout()) for seed in range(200)]
    counts = Counter(_layout(t) for t in texts)
    assert set(counts) == set(LAYOUTS) - {"table"} and len({strip_ground_truth(t) for t in texts}) > 150
    probs = SkillLayout().probabilities()
    assert all(abs(counts[name] / 200 - p) < 0.1 for name, p in probs.items()), counts
    only_prose = SkillLayout(bullets=0, numbered=0, prose=1, sections=0, mixed=0, boilerplate_mean=4)
    for seed in range(20):
        plain = strip_ground_truth(render_skill(claims, rng=random.Random(seed), layout=only_prose))
        body = plain.split("\n\n", 1)[1]
        assert not any(line.startswith(("- ", "1. ", "## ")) for line in body.splitlines())
        paragraphs = body.strip().split("\n\n")
        assert len(paragraphs) < len(claims)  # several claims per paragraph
    sectioned = strip_ground_truth(render_skill(claims, rng=random.Random(1),
                                                layout=SkillLayout(bullets=0, numbered=0, prose=0, mixed=0)))
    assert sectioned.count("\n## ") >= 3
    # Boilerplate sentences are text without ground truth.
    text = render_skill(claims, rng=random.Random(2), layout=only_prose)
    assert len(parse_skill(text)) == len(claims)


def test_parse_rejects_a_comment_whose_text_does_not_follow() -> None:
    text = render_skill([make_claim("h0-a.00", "open_question", "tile_width")])
    with pytest.raises(ValueError, match="ground-truth text"):
        parse_skill(text.replace("tiles 128 wide", "tiles 64 wide"))


def test_every_idea_has_phrasings_in_every_modality_with_resolved_slots() -> None:
    assert set(WORDINGS) == set(CATEGORIES)
    for cat, ideas in WORDINGS.items():
        simple = [i for i in ideas if not i.parts]
        assert len(simple) >= 3, cat
        assert len({i.key for i in ideas}) == len(ideas), cat
        for idea in ideas:
            info = IDEAS[(cat, idea.key)]
            assert len(idea.phrasings) >= 2, (cat, idea.key)
            assert len(info.phrasings) >= 5, (cat, idea.key)   # styled text: three more in wordings_styled.py
            assert all(len(p) == 3 for p in info.phrasings), (cat, idea.key)  # a missing comma joins two forms
            texts = set()
            for variant in range(len(info.phrasings)):
                forms = [claim_text(cat, idea.key, variant, m, tuple((n, VALUES[n]) for n in info.slots))
                         for m in MODALITIES]
                assert len(set(forms)) == 3, (cat, idea.key, variant)
                for form, raw in zip(forms, info.phrasings[variant]):
                    # every form uses exactly the idea's slots, so re-rendering never loses or invents a value
                    assert {f for f in info.slots if "{" + f + "}" in raw} == set(info.slots)
                    assert "{" not in form and "\n" not in form and "-->" not in form and "  " not in form
                    assert form[0].isupper() and form.endswith((".", "?")), form
                texts.update(forms)
            assert len(texts) == 3 * len(info.phrasings)
            if idea.parts:
                assert all(not IDEAS[(cat, part)].parts for part in idea.parts) and len(idea.parts) == 2
                assert set(info.slots) == {s for part in idea.parts for s in IDEAS[(cat, part)].slots}


def _words(text: str) -> set[str]:
    stop = {"a", "an", "the", "of", "in", "on", "to", "and", "or", "is", "are", "be", "it", "its", "at", "for", "by",
            "with", "from", "that", "this", "as", "than", "so", "not", "no"}
    return {w for w in "".join(ch if ch.isalnum() else " " for ch in text.lower()).split() if w not in stop}


def test_ideas_of_a_category_are_not_confusable() -> None:
    """Two simple ideas of one category share few words in any of their phrasings (a crude check that they are
    different assertions); a compound shares words with its parts by design and is left out."""
    for cat, ideas in WORDINGS.items():
        simple = [i for i in ideas if not i.parts]
        for a in simple:
            for b in simple:
                if a.key >= b.key:
                    continue
                for pa in IDEAS[(cat, a.key)].phrasings:
                    for pb in IDEAS[(cat, b.key)].phrasings:
                        wa, wb = _words(pa[1]), _words(pb[1])
                        assert len(wa & wb) / len(wa | wb) < 0.4, (cat, a.key, b.key)


# --- the spec -----------------------------------------------------------------------------------------------------

def test_spec_validation_errors_name_the_field() -> None:
    cases = [
        ({"bogus": 1}, "bogus"),
        ({"evolution": {"drop_rate": 1.5}}, "drop_rate"),
        ({"evolution": {"drop_rate": 0.5, "mutate_rate": 0.4, "strengthen_rate": 0.2}}, "drop_rate + mutate_rate"),
        ({"evolution": {"split_rate": 0.5, "mutate_rate": 0.6}}, "split_rate"),
        ({"evolution": {"merge_rate": 1.5}}, "merge_rate"),
        ({"evolution": {"copy_rate": 0.5}}, "copy_rate"),
        ({"tiers": {"tirx_solo": {"fail": 0.5, "pass": 0.4, "pass2x": 0.4}}}, "fail + pass + pass2x"),
        ({"tiers": {"tirx_solo": {"fail": 0.5, "pass": 0.5}}}, "pass2x"),
        ({"category_weights": {"open_question": -1}}, "open_question"),
        ({"category_weights": {"made_up_category": 0.2}}, "category_weights: 'made_up_category'"),
        ({"category_weights": {c: 0 for c in CATEGORIES}}, "category_weights"),
        ({"taxonomy": "no-such-taxonomy"}, "taxonomy"),
        ({"layout": {"prose": -1}}, "prose"),
        ({"attempt_wall_s_median": 0}, "attempt_wall_s_median"),
        ({"llm_error_prob": 2}, "llm_error_prob"),
    ]
    for data, needle in cases:
        with pytest.raises(ValidationError) as err:
            SyntheticSpec.model_validate(data)
        assert needle in str(err.value), (data, str(err.value))


def test_category_weights_come_from_the_taxonomy(tmp_path: Path) -> None:
    spec = SyntheticSpec.model_validate({"category_weights": {"unsupported_closure": 0.3}})
    default = SyntheticSpec().category_weights
    assert tuple(spec.category_weights.root) == CATEGORIES
    assert spec.category_weights["unsupported_closure"] == 0.3
    assert all(spec.category_weights[c] == default[c] for c in CATEGORIES if c != "unsupported_closure")
    # A taxonomy of one's own: a category without wordings needs weight 0.
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nversion: 1\nclosure_category: unsupported_closure\ncategories:\n" + "".join(
        f"  - name: {name}\n    definition: a category for this test only\n    examples: [one, two]\n"
        for name in ("unsupported_closure", "open_question", "brand_new")))
    with pytest.raises(ValidationError, match="brand_new.*no wordings"):
        SyntheticSpec.model_validate({"taxonomy": str(path)})
    mine = SyntheticSpec.model_validate({"taxonomy": str(path), "category_weights": {"brand_new": 0}})
    assert tuple(mine.category_weights.root) == ("unsupported_closure", "open_question", "brand_new")
    claims = fresh_claims(mine.model_copy(update={"initial_claims_mean": 40}), random.Random(0),
                          ClaimContext("h0", PROBLEM))
    assert {c.category for c in claims} == {"unsupported_closure", "open_question"}


def test_spec_roundtrips_through_its_yaml_shape() -> None:
    spec = SyntheticSpec.model_validate({"seed": 4, "tiers": {"tirx_skill": {"fail": 0.7, "pass": 0.2,
                                                                               "pass2x": 0.1}},
                                         "category_weights": {"open_question": 0.5}})
    assert spec.tiers.tirx_skill.pass_ == 0.2 and spec.tiers.tirx_solo == SyntheticSpec().tiers.tirx_solo
    dumped = spec.model_dump()
    assert dumped["tiers"]["tirx_skill"] == {"fail": 0.7, "pass": 0.2, "pass2x": 0.1}
    assert dumped["category_weights"]["open_question"] == 0.5 and len(dumped["category_weights"]) == 11
    assert SyntheticSpec.model_validate(dumped) == spec
    assert SyntheticSpec.model_validate_json(spec.model_dump_json()) == spec and hash(spec) == hash(
        SyntheticSpec.model_validate(dumped))
    ev = SyntheticSpec().evolution
    assert ev.copy_rate == pytest.approx(1 - ev.drop_rate - ev.mutate_rate - ev.strengthen_rate - ev.weaken_rate
                                         - ev.split_rate)
    assert TierProbs(fail=1, pass_=0, pass2x=0).fail == 1


def test_per_model_effects_and_closure_claims_change_only_what_they_name() -> None:
    table = TierProbs(fail=0.2, pass_=0.3, pass2x=0.5)
    spec = SyntheticSpec.model_validate({
        "skill_help_shift": 0.0, "source_pass_shift": 0.0, "closure_harm_per_share": 0.0,
        "closure_harm_per_claim": 0.25,
        "per_model": {"strong": {"tiers": {"tirx_solo": table.model_dump(), "tirx_skill": table.model_dump()},
                                 "source_pass_shift": 0.5}}})
    default = SyntheticSpec()
    # A model not named keeps the spec's own table and knobs; the named one only what it names.
    assert tier_probabilities(spec, "tirx", "solo", model="other") == default.tiers.tirx_solo
    assert tier_probabilities(spec, "tirx", "solo", model="strong") == table
    assert tier_probabilities(spec, "cutedsl", "solo", model="strong") == default.tiers.cutedsl_solo
    assert spec.effect("strong").closure_harm_per_claim == 0.25 and spec.effect("strong").skill_help_shift == 0.0
    # Source passed, two inherited closures: delta = 0.5 - 2 * 0.25 = 0 for "strong"; -0.5 for any other model.
    assert tier_probabilities(spec, "tirx", "skill", source_passed=True, closure_claims=2, model="strong") == table
    harmed = tier_probabilities(spec, "tirx", "skill", source_passed=True, closure_claims=2, model="other")
    assert harmed.fail == pytest.approx(default.tiers.tirx_skill.fail + 0.5 * (1 - default.tiers.tirx_skill.fail))
    # Drawn attempts follow the model's own table.
    counts = Counter(synthetic_outcome(Trial(trial_id=f"strong/{PROBLEM}/r{k}/solo_tirx", model="strong",
                                             problem_id=PROBLEM, dsl="tirx", target="gpu", arm="solo",
                                             kind="benchmark", replicate=k, arm_name="solo_tirx"), None,
                                       spec).final_tier for k in range(2000))
    assert abs(counts["fail"] / 2000 - 0.2) < 0.03 and abs(counts["pass2x"] / 2000 - 0.5) < 0.035, counts
    # The new knobs stay out of a dump at their defaults (old campaigns keep their config hash) and round-trip.
    assert "per_model" not in default.model_dump() and "closure_harm_per_claim" not in default.model_dump()
    assert SyntheticSpec.model_validate_json(spec.model_dump_json()) == spec and hash(spec) == hash(
        SyntheticSpec.model_validate(spec.model_dump()))
    with pytest.raises(ValidationError, match="closure_harm_per_claim"):
        SyntheticSpec.model_validate({"per_model": {"m": {"closure_harm_per_claim": 2}}})
