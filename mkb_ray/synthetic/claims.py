"""Synthetic SKILL.md claims: templates per taxonomy category and modality, rendering, parsing and evolution.

A synthetic SKILL.md is a flat markdown list, one claim per bullet. Above each bullet sits a ground-truth comment

    <!-- claim:<id> parent:<id|-> cat:<category> mod:<modality> edge:<edge> var:<k> slots:<k=v;...> -->

so lineage metrics computed from the text can be checked against the truth. `strip_ground_truth()` removes every
comment: feed that to an annotator or lineage matcher under test, never the file with its answers.

Claim texts are templates (written for this module) with slots filled from the problem's family when the claim is
born; a paraphrase switches to the other wording of the same category, a strengthen/weaken re-renders the same
wording one modality step stronger/weaker, a copy keeps the text verbatim. Everything is deterministic given the
`random.Random` passed in.
"""
from __future__ import annotations

import bisect
import functools
import math
import random
import re
import string
from dataclasses import dataclass
from typing import Literal, Optional, TypeVar
from urllib.parse import quote, unquote

from .spec import CATEGORIES, MODALITIES, Category, CategoryWeights, Modality, ModalityWeights, SyntheticSpec

_T = TypeVar("_T")
Edge = Literal["copied", "paraphrased", "strengthened", "weakened", "new"]
EDGES: tuple[Edge, ...] = ("copied", "paraphrased", "strengthened", "weakened", "new")

# (category) -> wordings; each wording is (hedged, plain, absolute). Slots: op, dtype, axis, dsl, hw, n, x, pct.
TEMPLATES: dict[Category, tuple[tuple[str, str, str], ...]] = {
    "workload_census": (
        ("{op} seems to be memory-bound at the benchmark shapes: it probably moves far more {dtype} bytes than it "
         "does arithmetic.",
         "{op} is memory-bound at the benchmark shapes: it moves far more {dtype} bytes than it does arithmetic.",
         "{op} is memory-bound at every shape: only the {dtype} bytes moved matter, never the arithmetic."),
        ("Most of the work in {op} appears to lie along the {axis}, which is likely about {n} elements long here.",
         "Most of the work in {op} lies along the {axis}, which is {n} elements long at the benchmark shapes.",
         "All of the work in {op} lies along the {axis}; its {n}-element length is the only size that matters."),
    ),
    "hardware_mapping": (
        ("Giving each CTA one slice of the {axis} may map {op} well onto the {hw} SMs.",
         "Give each CTA one slice of the {axis}: that keeps every {hw} SM busy for {op}.",
         "One CTA per slice of the {axis} is the only mapping of {op} that works on {hw}."),
        ("Blocks of {n} threads might be a reasonable fit for {op} on {hw}.",
         "Use {n} threads per block for {op} on {hw}; smaller blocks left bandwidth unused.",
         "{n} threads per block is always optimal for {op} on {hw}; never use another size."),
    ),
    "performance_evidence": (
        ("Vectorised {dtype} loads seemed to give roughly {x}x over eager in one timed submission.",
         "Vectorised {dtype} loads measured {x}x over eager in a timed submission.",
         "Vectorised {dtype} loads always give at least {x}x over eager."),
        ("Fusing the epilogue into the main loop may have cut kernel time by about {pct}% in the timed run.",
         "Fusing the epilogue into the main loop cut kernel time by {pct}% in the timed run.",
         "Fusing the epilogue into the main loop always cuts kernel time by {pct}% or more."),
    ),
    "verified_reformulation": (
        ("Computing {op} in one pass with a running accumulator appeared to pass correctness in {dtype}.",
         "A one-pass form of {op} with a running accumulator passed correctness in {dtype}.",
         "The one-pass form of {op} with a running accumulator is exact in every dtype."),
        ("Accumulating in fp32 and casting to {dtype} once at the end seemed to keep {op} within tolerance.",
         "Accumulating in fp32 and casting to {dtype} once at the end kept {op} within tolerance.",
         "Accumulating in fp32 and casting to {dtype} at the end always keeps {op} within tolerance."),
    ),
    "unverified_reformulation": (
        ("Splitting {op} along the {axis} and combining partial results afterwards might also be correct "
         "(not tested).",
         "{op} can be split along the {axis} with the partial results combined afterwards.",
         "{op} can always be split along the {axis} and recombined with no loss of accuracy."),
        ("The reduction in {op} could perhaps be reordered into a tree without hurting accuracy.",
         "The reduction in {op} can be reordered into a tree without hurting accuracy.",
         "Any reordering of the reduction in {op} is safe; accuracy never suffers."),
    ),
    "bounded_failure_diagnosis": (
        ("A wrong-result verdict was probably caused by reading past the end of the {axis} when its length is not "
         "a multiple of {n}.",
         "A wrong-result verdict came from reading past the end of the {axis} when its length is not a multiple "
         "of {n}.",
         "Wrong results in {op} always come from reading past the end of the {axis}."),
        ("The compile error seemed to come from mixing {dtype} and fp32 operands in one {dsl} expression.",
         "The compile error came from mixing {dtype} and fp32 operands in one {dsl} expression.",
         "{dsl} never accepts {dtype} and fp32 operands in one expression."),
    ),
    "verification_recipe": (
        ("It may help to check {op} against the reference on a shape whose {axis} is not a multiple of {n} "
         "before timing.",
         "Before timing, check {op} against the reference on a shape whose {axis} is not a multiple of {n}.",
         "Always check {op} against the reference on a ragged {axis} first; a kernel that skipped this is wrong."),
        ("Comparing the {dtype} output with an fp64 run of the reference might expose rounding bugs early.",
         "Compare the {dtype} output with an fp64 run of the reference to catch rounding bugs.",
         "Every {dtype} output must be compared with an fp64 reference run; nothing else catches rounding bugs."),
    ),
    "unsupported_closure": (
        ("There is probably little left to gain on {op} beyond what eager PyTorch already does.",
         "There is nothing left to gain on {op} beyond eager PyTorch.",
         "{op} cannot be made faster than eager PyTorch; do not spend time trying."),
        ("Tensor-core paths seem not to be worth it for {op} in {dsl}.",
         "Tensor-core paths are not worth it for {op} in {dsl}.",
         "Tensor cores are useless for {op} in {dsl}; never try them."),
    ),
    "unsupported_claim": (
        ("Shared-memory staging perhaps does not matter for {op} on {hw}.",
         "Shared-memory staging does not matter for {op} on {hw}.",
         "Shared-memory staging never matters for anything on {hw}."),
        ("{dtype} inputs might be about {x}x faster to process than fp32 here.",
         "{dtype} inputs are about {x}x faster to process than fp32.",
         "{dtype} inputs are always {x}x faster to process than fp32."),
    ),
    "dsl_specific_detail": (
        ("In {dsl}, launch parameters may need to be compile-time constants for the kernel to build.",
         "In {dsl}, launch parameters must be compile-time constants for the kernel to build.",
         "{dsl} rejects every launch parameter that is not a compile-time constant."),
        ("{dsl} seemed to want the {dtype} buffers contiguous along the {axis}.",
         "{dsl} needs the {dtype} buffers contiguous along the {axis}.",
         "{dsl} fails on any {dtype} buffer that is not contiguous along the {axis}."),
    ),
    "open_question": (
        ("It is unclear whether {op} would gain from keeping partial sums in registers across the {axis}.",
         "Open: does {op} gain from keeping partial sums in registers across the {axis}?",
         "The next attempt must settle whether register-resident partial sums across the {axis} speed up {op}; "
         "nothing else matters as much."),
        ("Maybe worth testing: whether {n}-wide tiles beat the current tiling for {op}.",
         "Untested: whether {n}-wide tiles beat the current tiling for {op}.",
         "{n}-wide tiles must be tried for {op} before anything else."),
    ),
}

# The slots each wording uses (any modality), so a claim stores exactly what re-rendering it needs.
_SLOTS: dict[tuple[Category, int], tuple[str, ...]] = {
    (cat, k): tuple(sorted({f for form in forms for _, f, _, _ in string.Formatter().parse(form) if f}))
    for cat, wordings in TEMPLATES.items() for k, forms in enumerate(wordings)}
_MOD_INDEX: dict[str, int] = {m: i for i, m in enumerate(MODALITIES)}

# Slot vocabulary per problem family: (ops, dtypes, axes). Ops are indexed by the problem's number.
_FAMILY_VOCAB: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "attention": (("GQA paged decode", "attention-state merge"), ("bf16", "fp16"),
                  ("KV sequence", "head dimension", "page table")),
    "kv_cache": (("FP8 KV-cache append", "RoPE with paged cache write"), ("fp8 e4m3", "bf16"),
                 ("block table", "token dimension", "head dimension")),
    "mlp_norm": (("fused add + RMSNorm", "SiLU-and-mul"), ("bf16", "fp32"), ("hidden dimension", "row dimension")),
    "moe": (("top-k softmax routing", "unpermute and weighted combine"), ("fp32", "bf16"),
            ("expert dimension", "token dimension")),
    "quantization": (("per-token FP8 quantisation", "per-group FP8 quantisation"), ("fp8 e4m3", "bf16"),
                     ("group dimension", "row dimension")),
    "linear_attention": (("gated delta-rule decode", "causal conv1d update"), ("fp32", "bf16"),
                         ("state dimension", "channel dimension")),
}
_DEFAULT_VOCAB = (("the fused operator",), ("bf16", "fp32"), ("innermost dimension",))
_DSL_NAMES = {"cutedsl": "CuTe DSL", "tirx": "TIRx"}
_HW_NAMES = {"gpu": "sm_90a", "cpu": "x86 CPU"}
_NS = ("32", "64", "128", "256", "512")
_XS = ("1.3", "1.5", "1.8", "2.4", "3.1")
_PCTS = ("10", "15", "20", "30", "40")

# A ground-truth comment line and the bullet right below it.
_CLAIM = re.compile(r"^<!-- claim:(\S+) parent:(\S+) cat:(\S+) mod:(\S+) edge:(\S+) var:(\d+) slots:(\S*) -->\n"
                    r"- ([^\n]*)$", re.MULTILINE)
_HEADER = re.compile(r"^<!-- synthetic-skill attempt:(\S+) tier:(\S+) -->$", re.MULTILINE)
_ANY_COMMENT = re.compile(r"[ \t]*<!--.*?-->[ \t]*\n?", re.DOTALL)


@dataclass(frozen=True, slots=True)
class SyntheticClaim:
    """One claim of a synthetic SKILL.md, with its ground truth.

    `parent_id` is the claim at hop k-1 it derives from (None for a new claim); `edge` says how; `variant` is the
    wording (index into TEMPLATES[category]); `slots` are the filled-in values, as sorted (name, value) pairs.
    """

    claim_id: str
    parent_id: Optional[str]
    category: Category
    modality: Modality
    text: str
    edge: Edge = "new"
    variant: int = 0
    slots: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ClaimContext:
    """Where claims are written: the attempt's id prefix for claim ids and what fills the slots of new claims."""

    id_prefix: str                      # unique per attempt within a chain, e.g. "h3-1a2b3c"
    problem_id: str = ""                # <family>/<name>, or synthetic/<family>_<k>
    dsl: str = "cutedsl"
    target: str = "gpu"


def claim_text(category: Category, variant: int, modality: Modality, slots: tuple[tuple[str, str], ...]) -> str:
    """The text of a claim: its wording in `modality` with `slots` filled in."""
    return TEMPLATES[category][variant][_MOD_INDEX[modality]].format(**dict(slots))


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
def _context_vocab(context: ClaimContext) -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]:
    """(fixed slot values, dtypes, axes) of a context; cached, as every claim of an attempt shares them."""
    op, dtypes, axes = problem_vocab(context.problem_id)
    fixed = {"op": op, "dsl": _DSL_NAMES.get(context.dsl, context.dsl), "hw": _HW_NAMES.get(context.target, "GPU")}
    return fixed, dtypes, axes


def _draw_slots(category: Category, variant: int, rng: random.Random, context: ClaimContext
                ) -> tuple[tuple[str, str], ...]:
    fixed, dtypes, axes = _context_vocab(context)
    out = []
    for name in _SLOTS[(category, variant)]:
        value = fixed.get(name)
        if value is None:
            pool = (dtypes if name == "dtype" else axes if name == "axis" else _NS if name == "n"
                    else _XS if name == "x" else _PCTS)
            value = pool[int(rng.random() * len(pool))]
        out.append((name, value))
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
def _cum_weights(weights: CategoryWeights | ModalityWeights) -> tuple[float, ...]:
    total, out = 0.0, []
    for w in weights.probabilities().values():
        total += w
        out.append(total)
    return tuple(out)


def _pick(rng: random.Random, items: tuple[_T, ...], cum: tuple[float, ...]) -> _T:
    """One of `items`, drawn with cumulative weights `cum` (zero-weight items are never drawn)."""
    return items[min(bisect.bisect_right(cum, rng.random() * cum[-1]), len(items) - 1)]


def new_claim(spec: SyntheticSpec, rng: random.Random, context: ClaimContext, claim_id: str) -> SyntheticClaim:
    """A claim born at this hop: category and modality drawn from the spec's weights, slots from the problem."""
    category: Category = _pick(rng, CATEGORIES, _cum_weights(spec.category_weights))
    modality: Modality = _pick(rng, MODALITIES, _cum_weights(spec.modality_weights))
    variant = int(rng.random() * len(TEMPLATES[category]))
    slots = _draw_slots(category, variant, rng, context)
    return SyntheticClaim(claim_id, None, category, modality, claim_text(category, variant, modality, slots),
                          "new", variant, slots)


def fresh_claims(spec: SyntheticSpec, rng: random.Random, context: ClaimContext) -> list[SyntheticClaim]:
    """The claims of a SKILL.md written without a source (hop 0, solo arms): Poisson(initial_claims_mean), >= 1."""
    count = max(1, poisson(rng, spec.initial_claims_mean))
    return [new_claim(spec, rng, context, f"{context.id_prefix}.{k:02d}") for k in range(count)]


def evolve(parent_claims: list[SyntheticClaim], spec: SyntheticSpec, rng: random.Random,
           context: ClaimContext) -> list[SyntheticClaim]:
    """Hop k's claims from hop k-1's: each parent is dropped, paraphrased, strengthened, weakened or copied with
    the spec's rates (see EvolutionRates for the convention), then Poisson(new_claims_per_hop) new claims follow.
    Survivors keep their parent's order; every claim gets a fresh id under `context.id_prefix`."""
    ev = spec.evolution
    t_drop = ev.drop_rate
    t_mutate = t_drop + ev.mutate_rate
    t_strong = t_mutate + ev.strengthen_rate
    t_weak = t_strong + ev.weaken_rate
    out: list[SyntheticClaim] = []
    for parent in parent_claims:
        r = rng.random()
        if r < t_drop:
            continue
        claim_id = f"{context.id_prefix}.{len(out):02d}"
        mod_index = _MOD_INDEX[parent.modality]
        if r < t_mutate:
            others = [k for k in range(len(TEMPLATES[parent.category])) if k != parent.variant]
            variant = rng.choice(others) if others else parent.variant
            # The new wording may use slots the old one did not: keep shared values, draw the missing ones.
            slots = _merge_slots(parent, variant, rng, context)
            out.append(SyntheticClaim(claim_id, parent.claim_id, parent.category, parent.modality,
                                      claim_text(parent.category, variant, parent.modality, slots),
                                      "paraphrased", variant, slots))
            continue
        if r < t_strong and mod_index < len(MODALITIES) - 1:
            edge: Edge = "strengthened"
            modality = MODALITIES[mod_index + 1]
        elif t_strong <= r < t_weak and mod_index > 0:
            edge, modality = "weakened", MODALITIES[mod_index - 1]
        else:
            out.append(SyntheticClaim(claim_id, parent.claim_id, parent.category, parent.modality, parent.text,
                                      "copied", parent.variant, parent.slots))
            continue
        out.append(SyntheticClaim(claim_id, parent.claim_id, parent.category, modality,
                                  claim_text(parent.category, parent.variant, modality, parent.slots),
                                  edge, parent.variant, parent.slots))
    for _ in range(poisson(rng, ev.new_claims_per_hop)):
        out.append(new_claim(spec, rng, context, f"{context.id_prefix}.{len(out):02d}"))
    return out


def _merge_slots(parent: SyntheticClaim, variant: int, rng: random.Random, context: ClaimContext
                 ) -> tuple[tuple[str, str], ...]:
    have = dict(parent.slots)
    need = _SLOTS[(parent.category, variant)]
    if all(name in have for name in need):
        return tuple((name, have[name]) for name in need)
    drawn = dict(_draw_slots(parent.category, variant, rng, context))
    return tuple((name, have.get(name, drawn[name])) for name in need)


def render_skill(claims: list[SyntheticClaim], *, attempt: Optional[str] = None, tier: Optional[str] = None) -> str:
    """A synthetic SKILL.md: a title, a header comment (the writing attempt and its final tier, when given) and one
    bullet per claim, each under its ground-truth comment. No claims: the empty string (an empty SKILL.md)."""
    if not claims:
        return ""
    lines = ["# Kernel notes (synthetic)",
             "<!-- synthetic SKILL.md drawn by mkb_ray.synthetic, not written by a model -->"]
    if attempt is not None or tier is not None:
        lines.append(f"<!-- synthetic-skill attempt:{quote(attempt, safe='/:') if attempt else '-'} "
                     f"tier:{tier or '-'} -->")
    lines.append("")
    for c in claims:
        lines.append(f"<!-- claim:{c.claim_id} parent:{c.parent_id or '-'} cat:{c.category} mod:{c.modality} "
                     f"edge:{c.edge} var:{c.variant} slots:{_encode_slots(c.slots)} -->")
        lines.append(f"- {c.text}")
    return "\n".join(lines) + "\n"


def parse_skill(text: Optional[str]) -> list[SyntheticClaim]:
    """The claims of a SKILL.md written by `render_skill`, in order. Bullets without a ground-truth comment (a file
    not written by synthetic mode) are ignored; an empty or None text has no claims."""
    if not text:
        return []
    claims: list[SyntheticClaim] = []
    for m in _CLAIM.finditer(text):
        claim_id, parent, cat, mod, edge, var, slot_text, bullet = m.groups()
        if cat not in TEMPLATES or mod not in _MOD_INDEX or edge not in EDGES:
            raise ValueError(f"unknown category, modality or edge in {m.group(0).splitlines()[0]!r}")
        claims.append(SyntheticClaim(claim_id, None if parent == "-" else parent, cat, mod,  # type: ignore[arg-type]
                                     bullet, edge, int(var), _decode_slots(slot_text)))  # type: ignore[arg-type]
    return claims


@functools.lru_cache(maxsize=4096)
def _encode_slots(slots: tuple[tuple[str, str], ...]) -> str:
    return ";".join(f"{k}={quote(v, safe='')}" for k, v in slots)


@functools.lru_cache(maxsize=4096)
def _decode_slots(text: str) -> tuple[tuple[str, str], ...]:
    return tuple((k, unquote(v)) for k, _, v in (s.partition("=") for s in text.split(";") if s))


def skill_source_tier(text: Optional[str]) -> Optional[str]:
    """The final tier of the attempt that wrote a synthetic SKILL.md (from its header), or None if unknown."""
    m = _HEADER.search(text or "")
    return None if m is None or m.group(2) == "-" else m.group(2)


def strip_ground_truth(text: str) -> str:
    """The SKILL.md as an agent or annotator would see it: every HTML comment removed."""
    return _ANY_COMMENT.sub("", text)
