"""Synthetic claims: what one claim is, how its text is made from the wordings, and how claims evolve hop to hop.

A claim is an *idea* of its category (wordings.py), said in one *phrasing* (`variant`) and one modality, with its
slots filled from the problem when the claim is born. Evolution (`evolve`, rates and convention in
spec.EvolutionRates): a copy keeps the text verbatim; a paraphrase switches to another phrasing of the same idea,
same modality and slot values; a strengthen/weaken re-renders the same phrasing one modality step stronger/weaker;
a split turns a compound idea into its two parts; a merge turns the two parts, both present, into their compound.
Survivors do not keep their parent's order. Everything is deterministic given the `random.Random` passed in.

How claims are written into a SKILL.md, with their ground truth, and read back: skill_md.py.
"""
from __future__ import annotations

import bisect
import functools
import math
import random
import re
import string
from dataclasses import dataclass
from typing import Literal, NamedTuple, Optional, TypeVar

from .spec import MODALITIES, Category, CategoryWeights, Modality, ModalityWeights, SkillLayout, SyntheticSpec
from .wordings import WORDINGS
from .wordings_styled import STYLED_PHRASINGS

_T = TypeVar("_T")
Edge = Literal["copied", "paraphrased", "strengthened", "weakened", "merged", "split", "new"]
EDGES: tuple[Edge, ...] = ("copied", "paraphrased", "strengthened", "weakened", "merged", "split", "new")
Slots = tuple[tuple[str, str], ...]


class IdeaInfo(NamedTuple):
    """An idea of wordings.py with what the generator needs: its slot names (sorted), its phrasings (wordings.py's,
    then wordings_styled.py's: `plain_count` of them are the plain ones) and, for a compound, its parts."""

    category: Category
    key: str
    slots: tuple[str, ...]
    phrasings: tuple[tuple[str, str, str], ...]
    parts: tuple[str, ...]
    plain_count: int

    def count(self, spec: SyntheticSpec) -> int:
        """How many of its phrasings the spec's text draws from (variants 0 .. count-1)."""
        return len(self.phrasings) if spec.layout.phrasings == "styled" else self.plain_count


def _slot_names(form: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(form) if f}


IDEAS: dict[tuple[Category, str], IdeaInfo] = {
    (cat, idea.key): IdeaInfo(cat, idea.key, tuple(sorted(_slot_names(idea.phrasings[0][1]))),
                              idea.phrasings + STYLED_PHRASINGS.get(cat, {}).get(idea.key, ()), idea.parts,
                              len(idea.phrasings))
    for cat, ideas in WORDINGS.items() for idea in ideas}
# Per category, the keys of its ideas (simple and compound): a new claim draws one uniformly.
_CATEGORY_IDEAS: dict[Category, tuple[str, ...]] = {cat: tuple(i.key for i in ideas) for cat, ideas in WORDINGS.items()}
_COMPOUNDS: tuple[IdeaInfo, ...] = tuple(info for info in IDEAS.values() if info.parts)
_MOD_INDEX: dict[str, int] = {m: i for i, m in enumerate(MODALITIES)}

# Slot vocabulary per problem family: (ops, dtypes, axes). Ops are indexed by the problem's number. The dtypes are
# the low-precision ones only: several wordings contrast {dtype} with fp32.
_FAMILY_VOCAB: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "attention": (("GQA paged decode", "attention-state merge"), ("bf16", "fp16"),
                  ("KV sequence", "head dimension", "page dimension")),
    "kv_cache": (("FP8 KV-cache append", "RoPE with paged cache write"), ("fp8 e4m3", "bf16"),
                 ("block dimension", "token dimension", "head dimension")),
    "mlp_norm": (("fused add + RMSNorm", "SiLU-and-mul"), ("bf16", "fp16"), ("hidden dimension", "row dimension")),
    "moe": (("top-k softmax routing", "unpermute and weighted combine"), ("bf16", "fp16"),
            ("expert dimension", "token dimension")),
    "quantization": (("per-token FP8 quantisation", "per-group FP8 quantisation"), ("fp8 e4m3", "bf16"),
                     ("group dimension", "row dimension")),
    "linear_attention": (("gated delta-rule decode", "causal conv1d update"), ("bf16", "fp16"),
                         ("state dimension", "channel dimension")),
}
_DEFAULT_VOCAB = (("the fused operator",), ("bf16", "fp16"), ("innermost dimension",))
_DSL_NAMES = {"cutedsl": "CuTe DSL", "tirx": "TIRx"}
_HW_NAMES = {"gpu": "sm_90a", "cpu": "x86 CPU"}
_POOLS = {"n": ("32", "64", "128", "256", "512"), "x": ("1.3", "1.5", "1.8", "2.4", "3.1"),
          "pct": ("10", "15", "20", "30", "40")}
_NEW_CLAIM_TRIES = 16  # draws of a new claim's idea while it repeats one the skill already says


@dataclass(frozen=True, slots=True)
class SyntheticClaim:
    """One claim of a synthetic SKILL.md, with its ground truth.

    `parent_ids` are the claims at hop k-1 it derives from (empty for a new claim, two for a merge); `edge` says
    how; `idea` is the key of its idea in wordings.WORDINGS[category], `variant` the phrasing (an index into that
    idea's phrasings); `slots` are the filled-in values, as (name, value) pairs sorted by name.
    """

    claim_id: str
    parent_ids: tuple[str, ...]
    category: Category
    modality: Modality
    idea: str
    variant: int
    slots: Slots
    text: str
    edge: Edge = "new"


@dataclass(frozen=True, slots=True)
class ClaimContext:
    """Where claims are written: the attempt's id prefix for claim ids and what fills the slots of new claims."""

    id_prefix: str                      # unique per attempt within a chain, e.g. "h3-1a2b3c"
    problem_id: str = ""                # <family>/<name>, or synthetic/<family>_<k>
    dsl: str = "cutedsl"
    target: str = "gpu"


@functools.lru_cache(maxsize=65536)
def claim_text(category: Category, idea: str, variant: int, modality: Modality, slots: Slots) -> str:
    """The text of a claim: phrasing `variant` of `idea` in `modality`, with `slots` filled in."""
    return IDEAS[(category, idea)].phrasings[variant][_MOD_INDEX[modality]].format(**dict(slots))


@functools.lru_cache(maxsize=4096)
def problem_vocab(problem_id: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(op, dtypes, axes) for a problem id: 'attention/01_gqa_paged_decode' or 'synthetic/attention_0'."""
    head, _, name = problem_id.partition("/")
    if head == "synthetic":
        family, _, number = name.rpartition("_")
        index = int(number) if number.isdigit() else 0
    else:
        family, digits = head, re.match(r"\d*", name).group()  # type: ignore[union-attr]
        index = int(digits) - 1 if digits else 0
    ops, dtypes, axes = _FAMILY_VOCAB.get(family, _DEFAULT_VOCAB)
    return ops[index % len(ops)], dtypes, axes


@functools.lru_cache(maxsize=4096)
def _context_pools(context: ClaimContext) -> dict[str, tuple[str, ...]]:
    """The values each slot may take in a context; cached, as every claim of an attempt shares them."""
    op, dtypes, axes = problem_vocab(context.problem_id)
    return {"op": (op,), "dsl": (_DSL_NAMES.get(context.dsl, context.dsl),), "hw": (_HW_NAMES.get(context.target,
                                                                                                     "GPU"),),
            "dtype": dtypes, "axis": axes, **_POOLS}


def _draw_slots(names: tuple[str, ...], rng: random.Random, context: ClaimContext) -> Slots:
    pools = _context_pools(context)
    out = []
    for name in names:
        pool = pools[name]
        out.append((name, pool[0] if len(pool) == 1 else pool[int(rng.random() * len(pool))]))
    return tuple(out)


def poisson(rng: random.Random, mean: float) -> int:
    """A Poisson draw (Knuth's method; fine for the small means used here, exact for any mean <= ~700)."""
    if mean <= 0:
        return 0
    limit, k, p = math.exp(-mean), 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


@functools.lru_cache(maxsize=64)
def cum_weights(weights: CategoryWeights | ModalityWeights | SkillLayout) -> tuple[tuple, tuple[float, ...]]:
    """(items, cumulative weights) of a weights model, for `pick`."""
    total, out = 0.0, []
    probs = weights.probabilities()
    for w in probs.values():
        total += w
        out.append(total)
    return tuple(probs), tuple(out)


def pick(rng: random.Random, items: tuple[_T, ...], cum: tuple[float, ...]) -> _T:
    """One of `items`, drawn with cumulative weights `cum` (zero-weight items are never drawn)."""
    return items[min(bisect.bisect_right(cum, rng.random() * cum[-1]), len(items) - 1)]


def _cover(taken: set[tuple[Category, str]], category: Category, idea: str) -> None:
    """Mark an idea, and the parts of a compound, as said in the skill."""
    taken.add((category, idea))
    for part in IDEAS[(category, idea)].parts:
        taken.add((category, part))


def draw_idea(spec: SyntheticSpec, rng: random.Random, taken: Optional[set[tuple[Category, str]]] = None
              ) -> IdeaInfo:
    """The idea of a claim born now: a category drawn from the spec's weights, then one of its ideas uniformly;
    with `taken` (see `new_claim`), drawn again (a few times at most) while the idea, or a part of it, is taken.
    The first draws of `new_claim`, apart so that `planted.claim_counts` can draw a SKILL.md's categories alone."""
    categories, cum_c = cum_weights(spec.category_weights)
    for _ in range(_NEW_CLAIM_TRIES):
        category: Category = pick(rng, categories, cum_c)
        ideas = _CATEGORY_IDEAS[category]
        info = IDEAS[(category, ideas[int(rng.random() * len(ideas))])]
        if taken is None or ((category, info.key) not in taken
                             and not any((category, part) in taken for part in info.parts)):
            break
    return info


def new_claim(spec: SyntheticSpec, rng: random.Random, context: ClaimContext, claim_id: str,
              taken: Optional[set[tuple[Category, str]]] = None) -> SyntheticClaim:
    """A claim born at this hop: category and modality drawn from the spec's weights, an idea of the category and a
    phrasing uniformly, slots from the problem. With `taken` (the ideas a skill already says, see `_cover`), the
    draw is repeated (a few times at most) while its idea, or a part of it, is already said, so a skill does not
    state one idea twice with different values; the new idea is then added to `taken`."""
    modalities, cum_m = cum_weights(spec.modality_weights)
    info = draw_idea(spec, rng, taken)
    category = info.category
    slots = _draw_slots(info.slots, rng, context)
    modality: Modality = pick(rng, modalities, cum_m)
    variant = int(rng.random() * info.count(spec))
    if taken is not None:
        _cover(taken, category, info.key)
    return SyntheticClaim(claim_id, (), category, modality, info.key, variant, slots,
                          claim_text(category, info.key, variant, modality, slots), "new")


def fresh_claims(spec: SyntheticSpec, rng: random.Random, context: ClaimContext) -> list[SyntheticClaim]:
    """The claims of a SKILL.md written without a source (hop 0, solo arms): Poisson(initial_claims_mean), >= 1."""
    count = max(1, poisson(rng, spec.initial_claims_mean))
    taken: set[tuple[Category, str]] = set()
    return [new_claim(spec, rng, context, f"{context.id_prefix}.{k:02d}", taken) for k in range(count)]


class _Child(NamedTuple):
    """A claim of hop k before it has an id (ids follow the final order)."""

    parent_ids: tuple[str, ...]
    category: Category
    modality: Modality
    idea: str
    variant: int
    slots: Slots
    text: str
    edge: Edge


class MergeablePair(NamedTuple):
    """Two parent claims (indices, document order) that are the parts of `compound` and agree on shared slots."""

    first: int
    second: int
    compound: IdeaInfo
    slots: Slots


def mergeable_pairs(claims: list[SyntheticClaim]) -> list[MergeablePair]:
    """The mergeable pairs of a skill's claims (see spec.EvolutionRates): for each compound idea, each claim of its
    first part matched, in document order, with the first unmatched claim of its second part whose shared slot
    values agree; a pair whose compound already stands in the skill with the same values is left out."""
    by_idea: dict[tuple[Category, str], list[int]] = {}
    for k, c in enumerate(claims):
        by_idea.setdefault((c.category, c.idea), []).append(k)
    pairs: list[MergeablePair] = []
    used: set[int] = set()
    for info in _COMPOUNDS:
        firsts = by_idea.get((info.category, info.parts[0]))
        seconds = by_idea.get((info.category, info.parts[1]))
        if not firsts or not seconds:
            continue
        existing = {claims[k].slots for k in by_idea.get((info.category, info.key), ())}
        for i in firsts:
            if i in used:
                continue
            a = dict(claims[i].slots)
            for j in seconds:
                if j in used:
                    continue
                b = claims[j].slots
                if any(a.get(name, value) != value for name, value in b):
                    continue
                slots = tuple(sorted({**a, **dict(b)}.items()))
                if slots in existing:
                    continue
                used.update((i, j))
                pairs.append(MergeablePair(min(i, j), max(i, j), info, slots))
                break
    pairs.sort()
    return pairs


def evolve(parent_claims: list[SyntheticClaim], spec: SyntheticSpec, rng: random.Random,
           context: ClaimContext) -> list[SyntheticClaim]:
    """Hop k's claims from hop k-1's (see spec.EvolutionRates for the convention): mergeable pairs merge, then each
    other parent is dropped, paraphrased, strengthened, weakened, split or copied; Poisson(new_claims_per_hop) new
    claims (of ideas neither hop says otherwise) are put at random places and survivors move with reorder_prob. Claim
    ids `<context.id_prefix>.<k>` follow the returned order."""
    ev = spec.evolution
    t_drop = ev.drop_rate
    t_mutate = t_drop + ev.mutate_rate
    t_strong = t_mutate + ev.strengthen_rate
    t_weak = t_strong + ev.weaken_rate
    t_split = t_weak + ev.split_rate
    merged_at: dict[int, _Child] = {}
    consumed: set[int] = set()
    if ev.merge_rate > 0:
        for pair in mergeable_pairs(parent_claims):
            if rng.random() < ev.merge_rate:
                merged_at[pair.first] = _merged(parent_claims[pair.first], parent_claims[pair.second], pair,
                                                spec, rng)
                consumed.add(pair.second)
    out: list[_Child] = []
    for k, parent in enumerate(parent_claims):
        if k in merged_at:
            out.append(merged_at[k])
            continue
        if k in consumed:
            continue
        r = rng.random()
        if r < t_drop:
            continue
        cat, idea, mod, slots, pid = parent.category, parent.idea, parent.modality, parent.slots, (parent.claim_id,)
        if r < t_mutate:
            n_phrasings = IDEAS[(cat, idea)].count(spec)
            variant = (parent.variant + 1 + int(rng.random() * (n_phrasings - 1))) % n_phrasings
            out.append(_Child(pid, cat, mod, idea, variant, slots, claim_text(cat, idea, variant, mod, slots),
                              "paraphrased"))
            continue
        mod_index = _MOD_INDEX[mod]
        if r < t_strong and mod_index < len(MODALITIES) - 1:
            modality, edge = MODALITIES[mod_index + 1], "strengthened"
        elif t_strong <= r < t_weak and mod_index > 0:
            modality, edge = MODALITIES[mod_index - 1], "weakened"
        elif t_weak <= r < t_split and IDEAS[(cat, idea)].parts:
            out.extend(_split(parent, spec, rng))
            continue
        else:
            out.append(_Child(pid, cat, mod, idea, parent.variant, slots, parent.text, "copied"))
            continue
        out.append(_Child(pid, cat, modality, idea, parent.variant, slots,
                          claim_text(cat, idea, parent.variant, modality, slots), edge))  # type: ignore[arg-type]

    # Reordering: movers (survivors with reorder_prob, and every new claim) go to uniformly random places.
    stay, movers = out, []
    if ev.reorder_prob > 0:
        stay = []
        for c in out:
            (movers if rng.random() < ev.reorder_prob else stay).append(c)
    n_new = poisson(rng, ev.new_claims_per_hop)
    if n_new:
        # A new claim's idea is said neither at this hop nor at the last: one that restated a claim of the source
        # skill (say, a dropped one, in the same words) would be inherited for any reader, and its `new` label a
        # ground truth that no lineage matcher could recover from the text.
        taken: set[tuple[Category, str]] = set()
        for c in [*out, *parent_claims]:
            _cover(taken, c.category, c.idea)
        for _ in range(n_new):
            c = new_claim(spec, rng, context, "", taken)
            movers.append(_Child((), c.category, c.modality, c.idea, c.variant, c.slots, c.text, "new"))
    for c in movers:
        stay.insert(int(rng.random() * (len(stay) + 1)), c)
    prefix = context.id_prefix
    return [SyntheticClaim(f"{prefix}.{k:02d}", *c) for k, c in enumerate(stay)]


def _merged(a: SyntheticClaim, b: SyntheticClaim, pair: MergeablePair, spec: SyntheticSpec,
            rng: random.Random) -> _Child:
    info = pair.compound
    modality = MODALITIES[min(_MOD_INDEX[a.modality], _MOD_INDEX[b.modality])]
    variant = int(rng.random() * info.count(spec))
    return _Child((a.claim_id, b.claim_id), info.category, modality, info.key, variant, pair.slots,
                  claim_text(info.category, info.key, variant, modality, pair.slots), "merged")


def _split(parent: SyntheticClaim, spec: SyntheticSpec, rng: random.Random) -> list[_Child]:
    have = dict(parent.slots)
    out = []
    for part in IDEAS[(parent.category, parent.idea)].parts:
        info = IDEAS[(parent.category, part)]
        slots = tuple((name, have[name]) for name in info.slots)
        variant = int(rng.random() * info.count(spec))
        out.append(_Child((parent.claim_id,), parent.category, parent.modality, part, variant, slots,
                          claim_text(parent.category, part, variant, parent.modality, slots), "split"))
    return out
