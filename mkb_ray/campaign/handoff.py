"""Where an intervention trial's hand-off is made: what it reads instead of its source's SKILL.md.

The scheduler asks `HandOffBuilder.build(trial, source_text)` for every trial whose arm name states an
intervention (records/intervention.py), just before dispatching it; the sources it needs are done by then (the
planner made the trial wait on them). It reads the store (the source's record and transcript, the control's spend)
and applies the pure transforms of `mkb_ray.interventions`:

- claim ablation: the source SKILL.md cut into claims (`claims.segment`), their categories read by the ablation's
  local annotator, and the claims of the category (or the claim at the position) removed;
- placebo: the donor problem's SKILL.md (the trial's `skill_from`) trimmed to the length of its own source's;
- budget-matched solo: no skill; extra wall-clock and tokens as much as the control spent reading its skill;
- episodic: the source attempt's transcript and verdicts, excerpted to the SKILL.md's length;
- verification gate (benchmark twins and every hop k >= 1 of a gated chain): the claims the source's own verdicts do
  not back, removed or marked;
- containment probe (a probe chain's hops): at hop 1, hop 0's SKILL.md with the planted false closure added as its
  last item (in synthetic mode the synthetic closure of `synthetic/plant.py`, which the generator reads); with a gate,
  every hop k >= 1 then reads through it.

An ablation or a benchmark gate that changes nothing hands on the control's exact text: the trial is then not run
(`HandOff.identical_to`), since its effect is zero by construction.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Optional

from ..records import AttemptRecord, HandOff, Trial
from ..records.intervention import InterventionRef, control_trial_id, is_intervention_arm, parse_arm

if TYPE_CHECKING:
    from ..store import RunStore


def needs_hand_off(trial: Trial) -> bool:
    """Whether `trial` reads something other than its source's SKILL.md as it is."""
    if not is_intervention_arm(trial.arm_name):
        return False
    return trial.kind == "intervention" or (trial.kind == "chain_hop" and trial.skill_from is not None)


class HandOffBuilder:
    """Builds hand-offs from the run's store. `ablation_specs` / `probe_specs`: the config's claim-ablation specs (their
    annotators and taxonomies) and containment probes (their planted claims), by arm token; `synthetic`: a synthetic
    campaign (a probe plants the generator's own closure). Annotators are made on first use and kept."""

    def __init__(self, store: "RunStore", ablation_specs: dict[str, Any], probe_specs: Optional[dict[str, Any]] = None,
                 synthetic: bool = False) -> None:
        self.store = store
        self.ablation_specs = ablation_specs
        self.probe_specs = probe_specs or {}
        self.synthetic = synthetic
        self._annotators: dict[tuple[str, str], Any] = {}

    @classmethod
    def for_config(cls, store: "RunStore", config: Any) -> "HandOffBuilder":
        def by_token(kind: str) -> dict[str, Any]:
            return {token: spec for spec in config.interventions if spec.kind == kind for token in spec.tokens()}

        return cls(store, by_token("claim_ablation"), by_token("containment_probe"), config.is_synthetic)

    # -- store reads -------------------------------------------------------------------------------------------
    def _record(self, trial_id: Optional[str]) -> Optional[AttemptRecord]:
        text = self.store.record_json(trial_id) if trial_id else None
        return AttemptRecord.model_validate_json(text) if text else None

    def _transcript(self, trial_id: str) -> Optional[list[dict[str, Any]]]:
        text = self.store.artifact_text(trial_id, "transcript.jsonl")
        if text is None:
            return None
        lines = []
        for line in text.splitlines():
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                continue    # a torn last line of a killed attempt: the rest still reads
            if isinstance(item, dict):
                lines.append(item)
        return lines

    def _annotator(self, spec: Any) -> Any:
        key = (spec.annotator, spec.taxonomy)
        if key not in self._annotators:
            from ..claims.annotators import make_annotator
            from ..claims.taxonomy import load_taxonomy

            self._annotators[key] = make_annotator(spec.annotator, load_taxonomy(spec.taxonomy))
        return self._annotators[key]

    # -- the hand-offs -----------------------------------------------------------------------------------------
    def build(self, trial: Trial, source_text: str) -> HandOff:
        """The hand-off of `trial` (an intervention trial or a chain twin's hop), given its `skill_from`'s SKILL.md."""
        ref = parse_arm(trial.arm_name)
        assert ref is not None, trial.trial_id
        if ref.kind == "verification_gate":
            return self._gate(trial, ref, source_text)
        if ref.kind == "containment_probe":
            return self._probe(trial, ref, source_text)
        if ref.kind == "claim_ablation":
            return self._ablate(trial, ref, source_text)
        if ref.kind == "placebo":
            own = (self.store.skill_text(trial.after[0]) or "") if trial.after else ""
            from ..interventions import trim_to_length

            text = trim_to_length(source_text, len(own.strip())) if own.strip() else ""
            return HandOff(text, note=f"placebo: the SKILL.md of {trial.skill_from} trimmed to the "
                                      f"{len(own.strip())} characters of this problem's own")
        if ref.kind == "episodic":
            from ..interventions import episodic_text

            record = self._record(trial.skill_from)
            if record is None or not source_text.strip():
                return HandOff("", note="episodic: the source left no record or no SKILL.md to match in length")
            lines = self._transcript(trial.skill_from) if trial.skill_from else None
            text = episodic_text(record, lines, len(source_text.strip()))
            return HandOff(text, note=f"episodic: excerpts of {trial.skill_from}'s transcript and verdicts, at most "
                                      f"{len(source_text.strip())} characters (its SKILL.md's length)")
        return self._budget(trial, ref)

    def _identical(self, trial: Trial, ref: InterventionRef, text: str, source_text: str) -> Optional[str]:
        if trial.kind == "intervention" and text.strip() == source_text.strip():
            return control_trial_id(trial.trial_id, ref)
        return None

    def _gate(self, trial: Trial, ref: InterventionRef, source_text: str) -> HandOff:
        from ..interventions import gate_skill

        result = gate_skill(source_text, self._record(trial.skill_from), ref.mode or "remove")
        note = (f"verification gate ({ref.mode}): of {result.kept + result.removed + result.marked} claims, "
                f"{result.removed} removed and {result.marked} marked as not backed by {trial.skill_from}'s verdicts")
        return HandOff(result.text, note=note, identical_to=self._identical(trial, ref, result.text, source_text))

    def _probe(self, trial: Trial, ref: InterventionRef, source_text: str) -> HandOff:
        text, notes = source_text, []
        if trial.hop == 1:
            spec = self.probe_specs.get(ref.token)
            if spec is None:
                raise ValueError(f"{trial.trial_id}: no containment_probe of the config plans {ref.token}")
            if self.synthetic:
                from ..synthetic.plant import plant_into

                text = plant_into(source_text)
            else:
                text = source_text.rstrip("\n") + ("\n" if source_text.strip() else "") + f"- {spec.claim}\n"
            notes.append("containment probe: the planted false closure added to hop 0's SKILL.md")
        if ref.mode is not None:
            gated = self._gate(trial, ref, text)
            text, notes = gated.text, notes + [gated.note]
        return HandOff(text, note="; ".join(notes))

    def _ablate(self, trial: Trial, ref: InterventionRef, source_text: str) -> HandOff:
        from ..claims.segment import segment
        from ..interventions import remove_claims

        claims = segment(source_text)
        if ref.claim is not None:
            drop = {ref.claim} if ref.claim < len(claims) else set()
            what = f"claim {ref.claim} of {len(claims)}"
        else:
            spec = self.ablation_specs.get(ref.token)
            if spec is None:
                raise ValueError(f"{trial.trial_id}: no claim_ablation of the config plans {ref.token}")
            labels = self._annotator(spec).categories([c.text for c in claims]) if claims else []
            drop = {c.index for c, (category, _) in zip(claims, labels) if category == ref.category}
            what = f"{len(drop)} of {len(claims)} claims read as {ref.category} by {spec.annotator}"
        text = remove_claims(source_text, claims, drop) if drop else source_text
        return HandOff(text, note=f"claim ablation: removed {what}",
                       identical_to=self._identical(trial, ref, text, source_text))

    def _budget(self, trial: Trial, ref: InterventionRef) -> HandOff:
        """A solo with what the control spent reading its skill on top of the budget: per LLM call, the skill's
        tokens (its characters / the agents' CHARS_PER_TOKEN) and that share of the call's processed tokens times
        its latency. An approximation: prefill is cheaper per token than decoding, so the extra time is an upper
        bound."""
        from ..agents.context import CHARS_PER_TOKEN   # the agents' own rule of thumb for a text's tokens

        control = control_trial_id(trial.trial_id, ref)
        record = self._record(control)
        skill = self.store.skill_text(f"{control.rsplit('/', 1)[0]}/{_source_arm(ref.control)}")
        if record is None or not skill:
            return HandOff("", note=f"budget-matched solo: {control} read no skill; no extra budget")
        skill_tokens = int(len(skill.strip()) / CHARS_PER_TOKEN)
        extra_s = 0.0
        for call in record.llm_calls:
            processed = call.usage.prompt_tokens + call.usage.completion_tokens
            if processed > 0:
                extra_s += call.usage.latency_s * min(1.0, skill_tokens / processed)
        extra_tokens = skill_tokens * len(record.llm_calls)
        return HandOff("", extra_wall_s=round(extra_s, 3), extra_tokens=extra_tokens,
                       note=f"budget-matched solo: +{extra_s:.1f} s and +{extra_tokens} tokens, what {control} "
                            f"spent reading its {skill_tokens}-token skill over {len(record.llm_calls)} LLM calls")


def _source_arm(skill_arm: str) -> str:
    """The solo arm a benchmark skill arm reads (`cutedsl2tirx_skill` reads `solo_cutedsl`)."""
    return f"solo_{skill_arm.split('2', 1)[0]}"
