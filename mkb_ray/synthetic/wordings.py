"""The wordings of synthetic claims: per taxonomy category, a few *ideas*, each said in a few *phrasings*, each
phrasing in the three modalities (hedged, plain, absolute). Data only; `claims.py` renders, parses and evolves.

- An **idea** is one assertion. Two ideas of one category say clearly different things, so a claim's idea is never
  in doubt from its text (a lineage matcher that confuses two ideas has made a real error).
- A **phrasing** is the same assertion in other words and another sentence structure: a paraphrase switches
  phrasing and keeps idea, modality and slot values.
- The three **modality** forms of a phrasing differ only in how strongly they assert (hedges, "always", "never"), so
  a strengthen/weaken keeps idea and phrasing and moves one step.
- A **compound** idea (`parts` set) is the conjunction of two simple ideas of the same category, said as one
  assertion. It is what a merge of those two claims produces and what a split takes apart. It uses exactly the union
  of its parts' slots.

Every form of an idea uses exactly the same slots (`{op}`, `{dtype}`, `{axis}`, `{dsl}`, `{hw}`, `{n}`, `{x}`,
`{pct}`), so a re-rendered claim never loses or invents a value; tests/test_synthetic.py checks that, and that every
form is one line ending a sentence. The texts were written for this module. Sentences do not start with a slot
whose value may be lower-case (op, dtype), so every claim reads as a sentence in prose.
"""
from __future__ import annotations

from typing import NamedTuple


class Idea(NamedTuple):
    """One assertion: its key (unique within the category), its phrasings as (hedged, plain, absolute) and, for a
    compound, the keys of the two simple ideas it joins."""

    key: str
    phrasings: tuple[tuple[str, str, str], ...]
    parts: tuple[str, ...] = ()


WORDINGS: dict[str, tuple[Idea, ...]] = {
    "workload_census": (
        Idea("memory_bound", (
            ("At the benchmark shapes {op} looks memory-bound: it probably moves far more {dtype} bytes than it "
             "spends on arithmetic.",
             "At the benchmark shapes {op} is memory-bound: it moves far more {dtype} bytes than it spends on "
             "arithmetic.",
             "At every shape {op} is memory-bound: the {dtype} bytes it moves are all that matters, never its "
             "arithmetic."),
            ("Traffic in {dtype} likely dominates the arithmetic of {op}, so bandwidth is probably the limit rather "
             "than compute.",
             "Traffic in {dtype} dominates the arithmetic of {op}, so bandwidth is the limit rather than compute.",
             "Traffic in {dtype} always dominates the arithmetic of {op}; bandwidth is the only limit, compute never "
             "is."),
        )),
        Idea("dominant_axis", (
            ("Most of the work in {op} seems to lie along the {axis}, which is probably about {n} elements long "
             "here.",
             "Most of the work in {op} lies along the {axis}, which is {n} elements long at the benchmark shapes.",
             "All of the work in {op} lies along the {axis}; its {n}-element length is the only size that matters."),
            ("The {axis} appears to be the long dimension of {op}: roughly {n} elements, which would carry most of "
             "the cost.",
             "The {axis} is the long dimension of {op}: {n} elements, carrying most of the cost.",
             "The {axis} is the only dimension of {op} that counts: its {n} elements carry the entire cost."),
        )),
        Idea("launch_overhead", (
            ("The inputs of {op} are small enough that fixed launch overhead is probably around {pct}% of the eager "
             "time.",
             "The inputs of {op} are small enough that fixed launch overhead is {pct}% of the eager time.",
             "The inputs of {op} are always so small that fixed launch overhead is at least {pct}% of the eager "
             "time."),
            ("Launch overhead, not work, may account for something like {pct}% of what eager spends on {op}, since "
             "the inputs are small.",
             "Launch overhead, not work, accounts for {pct}% of what eager spends on {op}, because the inputs are "
             "small.",
             "Launch overhead, not work, always accounts for {pct}% or more of what eager spends on {op}; the inputs "
             "are never large enough to change that."),
        )),
        Idea("memory_bound+dominant_axis", (
            ("At the benchmark shapes {op} looks memory-bound on its {dtype} traffic, and most of that traffic "
             "probably runs along the {axis} of about {n} elements.",
             "At the benchmark shapes {op} is memory-bound on its {dtype} traffic, and most of that traffic runs "
             "along the {axis} of {n} elements.",
             "At every shape {op} is bound by its {dtype} traffic alone, and all of it runs along the {n}-element "
             "{axis}."),
            ("Bandwidth rather than compute seems to limit {op}: the {dtype} bytes probably dominate, and they "
             "mostly come from the roughly {n}-long {axis}.",
             "Bandwidth rather than compute limits {op}: the {dtype} bytes dominate, and they mostly come from the "
             "{n}-long {axis}.",
             "Only bandwidth ever limits {op}: the {dtype} bytes always dominate, and they all come from the "
             "{n}-long {axis}."),
        ), parts=("memory_bound", "dominant_axis")),
    ),
    "hardware_mapping": (
        Idea("cta_per_slice", (
            ("Giving each CTA one slice of the {axis} may map {op} well onto the {hw} SMs.",
             "Giving each CTA one slice of the {axis} maps {op} well onto the {hw} SMs.",
             "Giving each CTA one slice of the {axis} is the only mapping of {op} that works on the {hw} SMs."),
            ("One CTA per {axis} slice probably keeps every {hw} SM busy for {op}.",
             "One CTA per {axis} slice keeps every {hw} SM busy for {op}.",
             "One CTA per {axis} slice always keeps every {hw} SM busy for {op}, and nothing else does."),
        )),
        Idea("block_threads", (
            ("Blocks of {n} threads might suit {op} on {hw}; smaller ones seemed to leave bandwidth unused.",
             "Blocks of {n} threads suit {op} on {hw}; smaller ones leave bandwidth unused.",
             "Blocks of {n} threads are always optimal for {op} on {hw}; any smaller size wastes bandwidth."),
            ("For {op} on {hw}, a block size of {n} threads is probably the right choice, as fewer threads did not "
             "seem to saturate memory.",
             "For {op} on {hw}, a block size of {n} threads is the right choice, as fewer threads do not saturate "
             "memory.",
             "For {op} on {hw}, a block size of {n} threads is the only right choice, as fewer threads never "
             "saturate memory."),
        )),
        Idea("vector_width", (
            ("Having each thread load 16 bytes of {dtype} at once probably lets {op} reach full memory bandwidth.",
             "Having each thread load 16 bytes of {dtype} at once lets {op} reach full memory bandwidth.",
             "Having each thread load 16 bytes of {dtype} at once is the only way {op} ever reaches full memory "
             "bandwidth."),
            ("Full bandwidth for {op} likely needs 16-byte-wide {dtype} accesses per thread rather than scalar ones.",
             "Full bandwidth for {op} needs 16-byte-wide {dtype} accesses per thread rather than scalar ones.",
             "Full bandwidth for {op} always requires 16-byte-wide {dtype} accesses per thread; scalar ones never "
             "get there."),
        )),
        Idea("block_threads+vector_width", (
            ("For {op} on {hw}, blocks of {n} threads with each thread loading 16 bytes of {dtype} at once probably "
             "reach full bandwidth.",
             "For {op} on {hw}, blocks of {n} threads with each thread loading 16 bytes of {dtype} at once reach "
             "full bandwidth.",
             "For {op} on {hw}, only blocks of {n} threads with each thread loading 16 bytes of {dtype} at once "
             "ever reach full bandwidth."),
            ("The mapping that seems to saturate memory for {op} on {hw} is {n} threads per block, each doing "
             "16-byte {dtype} accesses.",
             "The mapping that saturates memory for {op} on {hw} is {n} threads per block, each doing 16-byte "
             "{dtype} accesses.",
             "The one mapping that ever saturates memory for {op} on {hw} is {n} threads per block, each doing "
             "16-byte {dtype} accesses."),
        ), parts=("block_threads", "vector_width")),
    ),
    "performance_evidence": (
        Idea("vector_speedup", (
            ("Vectorised {dtype} loads seemed to give roughly {x}x over eager in one timed submission.",
             "Vectorised {dtype} loads gave {x}x over eager in a timed submission.",
             "Vectorised {dtype} loads always give at least {x}x over eager."),
            ("A timed submission with vectorised {dtype} loads appeared to run about {x} times faster than eager.",
             "A timed submission with vectorised {dtype} loads ran {x} times faster than eager.",
             "Any submission with vectorised {dtype} loads runs at least {x} times faster than eager."),
        )),
        Idea("epilogue_fusion", (
            ("Fusing the epilogue into the main loop may have cut kernel time by about {pct}% in the timed run.",
             "Fusing the epilogue into the main loop cut kernel time by {pct}% in the timed run.",
             "Fusing the epilogue into the main loop always cuts kernel time by {pct}% or more."),
            ("Kernel time seemed to drop by roughly {pct}% in the timed run once the epilogue was folded into the "
             "main loop.",
             "Kernel time dropped by {pct}% in the timed run once the epilogue was folded into the main loop.",
             "Kernel time always drops by at least {pct}% once the epilogue is folded into the main loop."),
        )),
        Idea("slower_first_version", (
            ("The first correct kernel for {op} appeared to be about {x}x slower than eager.",
             "The first correct kernel for {op} was {x}x slower than eager.",
             "Every first correct kernel for {op} is at least {x}x slower than eager."),
            ("Eager seemed to beat the first passing version of {op} by a factor of roughly {x}.",
             "Eager beat the first passing version of {op} by a factor of {x}.",
             "Eager always beats a first passing version of {op} by a factor of {x} or more."),
        )),
        Idea("vector_speedup+epilogue_fusion", (
            ("Vectorised {dtype} loads seemed to give about {x}x over eager, and fusing the epilogue into the main "
             "loop may have cut a further {pct}% of kernel time.",
             "Vectorised {dtype} loads gave {x}x over eager, and fusing the epilogue into the main loop cut a "
             "further {pct}% of kernel time.",
             "Vectorised {dtype} loads always give at least {x}x over eager, and fusing the epilogue into the main "
             "loop always cuts a further {pct}% or more."),
            ("The timed runs suggest two wins: roughly {x}x over eager from vectorised {dtype} loads, then perhaps "
             "{pct}% less kernel time from the fused epilogue.",
             "The timed runs show two wins: {x}x over eager from vectorised {dtype} loads, then {pct}% less kernel "
             "time from the fused epilogue.",
             "The timed runs prove two guaranteed wins: at least {x}x over eager from vectorised {dtype} loads, "
             "then at least {pct}% less kernel time from the fused epilogue."),
        ), parts=("vector_speedup", "epilogue_fusion")),
    ),
    "verified_reformulation": (
        Idea("loop_swap", (
            ("Swapping the loops so the {axis} is innermost seemed to leave {op} correct in {dtype}.",
             "Swapping the loops so the {axis} is innermost left {op} correct in {dtype}.",
             "Swapping the loops so the {axis} is innermost never changes whether {op} is correct in {dtype}."),
            ("Making the {axis} the inner loop of {op} appeared to pass the {dtype} correctness check.",
             "Making the {axis} the inner loop of {op} passed the {dtype} correctness check.",
             "Making the {axis} the inner loop of {op} always passes the {dtype} correctness check."),
        )),
        Idea("fp32_accumulate", (
            ("Accumulating in fp32 seemed to keep {op} within tolerance.",
             "Accumulating in fp32 kept {op} within tolerance.",
             "Accumulating in fp32 always keeps {op} within tolerance."),
            ("With the sums carried in fp32, {op} appeared to pass the correctness check.",
             "With the sums carried in fp32, {op} passed the correctness check.",
             "With the sums carried in fp32, {op} passes the correctness check every time."),
        )),
        Idea("cast_once", (
            ("Casting to {dtype} only once, at the very end, seemed to be enough for {op} to pass correctness.",
             "Casting to {dtype} only once, at the very end, was enough for {op} to pass correctness.",
             "Casting to {dtype} only once, at the very end, is always enough for {op} to pass correctness."),
            ("Deferring the conversion to {dtype} until the final store appeared to keep {op} correct.",
             "Deferring the conversion to {dtype} until the final store kept {op} correct.",
             "Deferring the conversion to {dtype} until the final store always keeps {op} correct."),
        )),
        Idea("fp32_accumulate+cast_once", (
            ("Accumulating in fp32 and casting to {dtype} once at the end seemed to keep {op} within tolerance.",
             "Accumulating in fp32 and casting to {dtype} once at the end kept {op} within tolerance.",
             "Accumulating in fp32 and casting to {dtype} once at the end always keeps {op} within tolerance."),
            ("Carrying the sums in fp32 and deferring the {dtype} conversion to the final store appeared to make "
             "{op} pass correctness.",
             "Carrying the sums in fp32 and deferring the {dtype} conversion to the final store made {op} pass "
             "correctness.",
             "Carrying the sums in fp32 and deferring the {dtype} conversion to the final store always makes {op} "
             "pass correctness."),
        ), parts=("fp32_accumulate", "cast_once")),
    ),
    "unverified_reformulation": (
        Idea("chunk_and_combine", (
            ("Splitting the {axis} of {op} into chunks and combining the partial results afterwards would probably "
             "give the same answer.",
             "Splitting the {axis} of {op} into chunks and combining the partial results afterwards gives the same "
             "answer.",
             "Splitting the {axis} of {op} into chunks and combining the partial results afterwards always gives "
             "exactly the same answer."),
            ("The partial results of {op} over separate {axis} chunks could likely be merged at the end without "
             "changing the output.",
             "The partial results of {op} over separate {axis} chunks can be merged at the end without changing "
             "the output.",
             "The partial results of {op} over separate {axis} chunks can always be merged at the end with no "
             "change to the output whatsoever."),
        )),
        Idea("tree_reduction", (
            ("The reduction in {op} could perhaps be reordered into a tree without hurting accuracy.",
             "The reduction in {op} can be reordered into a tree without hurting accuracy.",
             "The reduction in {op} can be reordered into any tree at all without ever hurting accuracy."),
            ("Summing pairwise in a tree instead of left to right should probably be just as accurate for {op}.",
             "Summing pairwise in a tree instead of left to right is just as accurate for {op}.",
             "Summing pairwise in a tree instead of left to right is always exactly as accurate for {op}."),
        )),
        Idea("reciprocal", (
            ("Precomputing the reciprocal once and multiplying might replace the per-element division in {op} with "
             "no visible change in {dtype}.",
             "Precomputing the reciprocal once and multiplying replaces the per-element division in {op} with no "
             "visible change in {dtype}.",
             "Precomputing the reciprocal once and multiplying always replaces the per-element division in {op} "
             "with no change at all in {dtype}."),
            ("The division inside {op} could likely become a multiply by a reciprocal computed up front, and the "
             "{dtype} outputs would probably not notice.",
             "The division inside {op} can become a multiply by a reciprocal computed up front, and the {dtype} "
             "outputs do not notice.",
             "The division inside {op} can always become a multiply by a reciprocal computed up front, and the "
             "{dtype} outputs never notice."),
        )),
        Idea("chunk_and_combine+tree_reduction", (
            ("The {axis} of {op} could probably be split into chunks whose partial results are then combined in a "
             "tree, with no loss of accuracy.",
             "The {axis} of {op} can be split into chunks whose partial results are then combined in a tree, with "
             "no loss of accuracy.",
             "The {axis} of {op} can always be split into chunks whose partial results are combined in any tree, "
             "with never any loss of accuracy."),
            ("Chunking {op} along the {axis} and summing the chunk results pairwise would likely give the same "
             "output as the sequential version.",
             "Chunking {op} along the {axis} and summing the chunk results pairwise gives the same output as the "
             "sequential version.",
             "Chunking {op} along the {axis} and summing the chunk results pairwise always gives exactly the "
             "sequential output."),
        ), parts=("chunk_and_combine", "tree_reduction")),
    ),
    "bounded_failure_diagnosis": (
        Idea("ragged_tail", (
            ("A wrong-result verdict was probably caused by reading past the end of the {axis} when its length is "
             "not a multiple of {n}.",
             "A wrong-result verdict came from reading past the end of the {axis} when its length is not a "
             "multiple of {n}.",
             "Every wrong-result verdict came from reading past the end of the {axis} when its length is not a "
             "multiple of {n}."),
            ("The incorrect outputs seem to trace back to the last partial tile of {n}, which read beyond the end "
             "of the {axis}.",
             "The incorrect outputs trace back to the last partial tile of {n}, which read beyond the end of the "
             "{axis}.",
             "All of the incorrect outputs trace back to the last partial tile of {n}, which read beyond the end "
             "of the {axis}, and to nothing else."),
        )),
        Idea("mixed_dtype_compile", (
            ("The compile error seemed to come from mixing {dtype} and fp32 operands in one {dsl} expression.",
             "The compile error came from mixing {dtype} and fp32 operands in one {dsl} expression.",
             "Every compile error came from mixing {dtype} and fp32 operands in one {dsl} expression."),
            ("{dsl} probably refused to build because a {dtype} value and an fp32 value met in the same "
             "expression.",
             "{dsl} refused to build because a {dtype} value and an fp32 value met in the same expression.",
             "{dsl} refused to build for one reason only: a {dtype} value and an fp32 value met in the same "
             "expression."),
        )),
        Idea("divergent_barrier", (
            ("The timeout in {op} was likely a hang on a barrier placed inside a branch that not every thread "
             "took.",
             "The timeout in {op} was a hang on a barrier placed inside a branch that not every thread took.",
             "The timeout in {op} can only have been a hang on a barrier placed inside a branch that not every "
             "thread took."),
            ("A barrier that only some threads reached, because it sat under a condition, seems to be what made "
             "{op} time out.",
             "A barrier that only some threads reached, because it sat under a condition, is what made {op} time "
             "out.",
             "A barrier that only some threads reached, because it sat under a condition, is the sole reason {op} "
             "timed out."),
        )),
        Idea("ragged_tail+mixed_dtype_compile", (
            ("The two failures seem to have had separate causes: the wrong result probably came from reading past "
             "the end of the {axis} when its length is not a multiple of {n}, and the compile error from mixing "
             "{dtype} and fp32 operands in one {dsl} expression.",
             "The two failures had separate causes: the wrong result came from reading past the end of the {axis} "
             "when its length is not a multiple of {n}, and the compile error from mixing {dtype} and fp32 "
             "operands in one {dsl} expression.",
             "The two failures had separate and certain causes: the wrong result could only come from reading past "
             "the end of the {axis} when its length is not a multiple of {n}, and the compile error only from "
             "mixing {dtype} and fp32 operands in one {dsl} expression."),
            ("Both failed submissions are probably explained: a read beyond the {axis} in the last partial tile "
             "of {n} gave wrong outputs, and a {dtype} value meeting an fp32 value in one expression stopped {dsl} "
             "from building.",
             "Both failed submissions are explained: a read beyond the {axis} in the last partial tile of {n} gave "
             "wrong outputs, and a {dtype} value meeting an fp32 value in one expression stopped {dsl} from "
             "building.",
             "Both failed submissions are fully explained, with no other cause possible: a read beyond the {axis} "
             "in the last partial tile of {n} gave wrong outputs, and a {dtype} value meeting an fp32 value in one "
             "expression stopped {dsl} from building."),
        ), parts=("ragged_tail", "mixed_dtype_compile")),
    ),
    "verification_recipe": (
        Idea("ragged_shape_test", (
            ("Before timing, it may help to check {op} against the reference on a shape whose {axis} is not a "
             "multiple of {n}.",
             "Before timing, check {op} against the reference on a shape whose {axis} is not a multiple of {n}.",
             "Before timing, always check {op} against the reference on a shape whose {axis} is not a multiple of "
             "{n}; a kernel that skipped this check is wrong."),
            ("A test case with a ragged {axis}, one that {n} does not divide, is probably worth running on {op} "
             "before any timing.",
             "A test case with a ragged {axis}, one that {n} does not divide, has to be run on {op} before any "
             "timing.",
             "A test case with a ragged {axis}, one that {n} does not divide, must always be run on {op} before "
             "any timing, without exception."),
        )),
        Idea("fp64_reference", (
            ("Comparing the {dtype} output with an fp64 run of the reference might expose rounding bugs early.",
             "Comparing the {dtype} output with an fp64 run of the reference exposes rounding bugs early.",
             "Comparing the {dtype} output with an fp64 run of the reference is the only thing that exposes "
             "rounding bugs."),
            ("Rounding problems in {dtype} probably show up sooner against a float64 copy of the reference than "
             "against the {dtype} one.",
             "Rounding problems in {dtype} show up sooner against a float64 copy of the reference than against "
             "the {dtype} one.",
             "Rounding problems in {dtype} only ever show up against a float64 copy of the reference, never "
             "against the {dtype} one."),
        )),
        Idea("many_seeds", (
            ("It is probably wise to run {op} on {n} different random inputs before trusting a pass.",
             "Run {op} on {n} different random inputs before trusting a pass.",
             "Always run {op} on {n} different random inputs before trusting a pass; a single input proves "
             "nothing."),
            ("A single random draw may not be enough to trust {op}; {n} draws with different seeds seem safer.",
             "A single random draw is not enough to trust {op}; use {n} draws with different seeds.",
             "A single random draw never suffices to trust {op}; {n} draws with different seeds are the minimum."),
        )),
        Idea("ragged_shape_test+fp64_reference", (
            ("Before timing, it may help to run {op} on a shape whose {axis} is not a multiple of {n} and compare "
             "its {dtype} output with an fp64 reference.",
             "Before timing, run {op} on a shape whose {axis} is not a multiple of {n} and compare its {dtype} "
             "output with an fp64 reference.",
             "Before timing, always run {op} on a shape whose {axis} is not a multiple of {n} and compare its "
             "{dtype} output with an fp64 reference; skipping either check lets bugs through."),
            ("A good check of {op} is probably a ragged {axis} that {n} does not divide, judged against a float64 "
             "copy of the reference rather than the {dtype} one.",
             "The right check of {op} is a ragged {axis} that {n} does not divide, judged against a float64 copy "
             "of the reference rather than the {dtype} one.",
             "The only trustworthy check of {op} is a ragged {axis} that {n} does not divide, judged against a "
             "float64 copy of the reference and never the {dtype} one."),
        ), parts=("ragged_shape_test", "fp64_reference")),
    ),
    "unsupported_closure": (
        Idea("eager_ceiling", (
            ("There is probably little left to gain on {op} beyond what eager PyTorch already does.",
             "There is nothing left to gain on {op} beyond what eager PyTorch already does.",
             "There is nothing left to gain on {op} beyond what eager PyTorch already does, and there never will "
             "be; do not spend time trying."),
            ("Eager PyTorch may already be close to the best anyone can do for {op}, so a custom kernel is likely "
             "wasted effort.",
             "Eager PyTorch is already the best anyone can do for {op}, so a custom kernel is wasted effort.",
             "Eager PyTorch is already the best anyone could ever do for {op}, so a custom kernel is always wasted "
             "effort."),
        )),
        Idea("no_tensor_cores", (
            ("Tensor-core paths seem not to be worth it for {op} in {dsl}.",
             "Tensor-core paths are not worth it for {op} in {dsl}.",
             "Tensor-core paths are useless for {op} in {dsl}; never try them."),
            ("Routing {op} through the tensor cores in {dsl} probably would not pay off, so it may be best left "
             "alone.",
             "Routing {op} through the tensor cores in {dsl} does not pay off, so leave it alone.",
             "Routing {op} through the tensor cores in {dsl} can never pay off, so do not even try it."),
        )),
        Idea("no_fusion", (
            ("Fusing {op} with the operation after it probably cannot be done in {dsl}, so two launches may be "
             "unavoidable.",
             "Fusing {op} with the operation after it cannot be done in {dsl}, so two launches are unavoidable.",
             "Fusing {op} with the operation after it is impossible in {dsl}; two launches are always "
             "unavoidable."),
            ("{dsl} likely offers no way to merge {op} into the next kernel, so trying seems pointless.",
             "{dsl} offers no way to merge {op} into the next kernel, so trying is pointless.",
             "{dsl} will never offer a way to merge {op} into the next kernel, so trying is always pointless."),
        )),
        Idea("eager_ceiling+no_tensor_cores", (
            ("There is probably little to gain on {op} beyond eager PyTorch, and tensor-core paths in {dsl} seem "
             "not to change that.",
             "There is nothing to gain on {op} beyond eager PyTorch, and tensor-core paths in {dsl} do not change "
             "that.",
             "There is nothing to gain on {op} beyond eager PyTorch, and tensor-core paths in {dsl} never change "
             "that; do not try either."),
            ("A custom kernel for {op} is likely wasted effort: eager PyTorch may already be near the best, and "
             "the tensor cores in {dsl} probably would not help.",
             "A custom kernel for {op} is wasted effort: eager PyTorch is already the best, and the tensor cores "
             "in {dsl} do not help.",
             "A custom kernel for {op} is always wasted effort: eager PyTorch is already the best possible, and "
             "the tensor cores in {dsl} can never help."),
        ), parts=("eager_ceiling", "no_tensor_cores")),
    ),
    "unsupported_claim": (
        Idea("smem_irrelevant", (
            ("Shared-memory staging perhaps does not matter for {op} on {hw}.",
             "Shared-memory staging does not matter for {op} on {hw}.",
             "Shared-memory staging never matters for {op} on {hw}, nor for anything else there."),
            ("On {hw}, staging the inputs of {op} through shared memory probably makes no difference to speed.",
             "On {hw}, staging the inputs of {op} through shared memory makes no difference to speed.",
             "On {hw}, staging the inputs of {op} through shared memory can never make any difference to speed."),
        )),
        Idea("low_precision_speed", (
            ("Inputs in {dtype} might be about {x}x faster to process than fp32 ones.",
             "Inputs in {dtype} are {x}x faster to process than fp32 ones.",
             "Inputs in {dtype} are always {x}x faster to process than fp32 ones."),
            ("Processing fp32 instead of {dtype} probably costs roughly {x} times as much.",
             "Processing fp32 instead of {dtype} costs {x} times as much.",
             "Processing fp32 instead of {dtype} always costs exactly {x} times as much."),
        )),
        Idea("fits_in_l2", (
            ("Everything {op} touches probably fits in the L2 cache of {hw} for batches of up to {n}.",
             "Everything {op} touches fits in the L2 cache of {hw} for batches of up to {n}.",
             "Everything {op} touches always fits in the L2 cache of {hw} for batches of up to {n}, with room to "
             "spare."),
            ("For batches of at most {n}, the working set of {op} seems small enough to stay resident in the {hw} "
             "L2.",
             "For batches of at most {n}, the working set of {op} is small enough to stay resident in the {hw} L2.",
             "For batches of at most {n}, the working set of {op} always stays resident in the {hw} L2, without "
             "exception."),
        )),
        Idea("smem_irrelevant+fits_in_l2", (
            ("Shared-memory staging perhaps does not matter for {op} on {hw}, since everything it touches probably "
             "fits in L2 for batches of up to {n}.",
             "Shared-memory staging does not matter for {op} on {hw}, since everything it touches fits in L2 for "
             "batches of up to {n}.",
             "Shared-memory staging never matters for {op} on {hw}, since everything it touches always fits in L2 "
             "for batches of up to {n}."),
            ("With the working set of {op} probably resident in the {hw} L2 for batches of at most {n}, staging "
             "through shared memory seems to make no difference.",
             "With the working set of {op} resident in the {hw} L2 for batches of at most {n}, staging through "
             "shared memory makes no difference.",
             "With the working set of {op} always resident in the {hw} L2 for batches of at most {n}, staging "
             "through shared memory can never make a difference."),
        ), parts=("smem_irrelevant", "fits_in_l2")),
    ),
    "dsl_specific_detail": (
        Idea("constexpr_launch", (
            ("In {dsl}, launch parameters may need to be compile-time constants for the kernel to build.",
             "In {dsl}, launch parameters must be compile-time constants for the kernel to build.",
             "In {dsl}, every launch parameter without exception must be a compile-time constant, or the kernel "
             "never builds."),
            ("{dsl} seems to reject a kernel whose grid or block size is only known at run time.",
             "{dsl} rejects a kernel whose grid or block size is only known at run time.",
             "{dsl} always rejects any kernel whose grid or block size is only known at run time."),
        )),
        Idea("contiguous_buffers", (
            ("{dsl} seemed to want the {dtype} buffers contiguous along the {axis}.",
             "{dsl} needs the {dtype} buffers contiguous along the {axis}.",
             "{dsl} fails on every {dtype} buffer that is not contiguous along the {axis}."),
            ("Passing a {dtype} tensor that is strided along the {axis} probably breaks the {dsl} kernel, so a "
             "contiguous copy may be needed first.",
             "Passing a {dtype} tensor that is strided along the {axis} breaks the {dsl} kernel, so make a "
             "contiguous copy first.",
             "Passing a {dtype} tensor that is strided along the {axis} always breaks the {dsl} kernel, so a "
             "contiguous copy is mandatory first."),
        )),
        Idea("alignment", (
            ("{dsl} probably assumes buffers aligned to {n} bytes when it emits vector loads.",
             "{dsl} assumes buffers aligned to {n} bytes when it emits vector loads.",
             "{dsl} always assumes buffers aligned to {n} bytes when it emits vector loads, and never checks."),
            ("Vector loads generated by {dsl} seem to need {n}-byte-aligned pointers, and misaligned ones may "
             "fault.",
             "Vector loads generated by {dsl} need {n}-byte-aligned pointers, and misaligned ones fault.",
             "Vector loads generated by {dsl} need {n}-byte-aligned pointers, and misaligned ones fault every "
             "time."),
        )),
        Idea("constexpr_launch+alignment", (
            ("In {dsl}, launch parameters may need to be compile-time constants, and buffers probably have to be "
             "{n}-byte aligned for vector loads.",
             "In {dsl}, launch parameters must be compile-time constants, and buffers must be {n}-byte aligned "
             "for vector loads.",
             "In {dsl}, launch parameters must always be compile-time constants, and buffers must always be "
             "{n}-byte aligned for vector loads, without exception."),
            ("{dsl} seems to have two build-time demands: a grid and block size known at compile time, and "
             "{n}-byte-aligned pointers wherever it emits vector loads.",
             "{dsl} has two build-time demands: a grid and block size known at compile time, and {n}-byte-aligned "
             "pointers wherever it emits vector loads.",
             "{dsl} has two demands it never relaxes: a grid and block size known at compile time, and "
             "{n}-byte-aligned pointers wherever it emits vector loads."),
        ), parts=("constexpr_launch", "alignment")),
    ),
    "open_question": (
        Idea("register_partials", (
            ("It is unclear whether {op} would gain from keeping partial sums in registers across the {axis}.",
             "Open question: does {op} gain from keeping partial sums in registers across the {axis}?",
             "The next attempt must settle whether {op} gains from keeping partial sums in registers across the "
             "{axis}; nothing matters more."),
            ("Perhaps worth finding out: would register-resident partial sums along the {axis} make {op} faster?",
             "Still to find out: whether register-resident partial sums along the {axis} make {op} faster.",
             "Before anything else, find out whether register-resident partial sums along the {axis} make {op} "
             "faster."),
        )),
        Idea("tile_width", (
            ("Maybe worth testing: whether tiles {n} wide beat the current tiling for {op}.",
             "Untested so far: whether tiles {n} wide beat the current tiling for {op}.",
             "Must be tested first: whether tiles {n} wide beat the current tiling for {op}."),
            ("It might be worth checking whether a tile width of {n} does better than the present tiling of {op}.",
             "Nobody has checked whether a tile width of {n} does better than the present tiling of {op}.",
             "Checking whether a tile width of {n} does better than the present tiling of {op} is the first thing "
             "anyone must do next."),
        )),
        Idea("persistent_kernel", (
            ("It might be worth asking whether a persistent kernel would beat one launch per batch for {op}.",
             "Unknown: whether a persistent kernel beats one launch per batch for {op}.",
             "Whether a persistent kernel beats one launch per batch for {op} is the question the next attempt "
             "must answer first."),
            ("Perhaps a single long-running kernel looping over batches would outdo separate launches of {op}; "
             "nobody has tried.",
             "Nobody has tried a single long-running kernel looping over batches instead of separate launches of "
             "{op}.",
             "A single long-running kernel looping over batches instead of separate launches of {op} has to be "
             "tried next, before anything else."),
        )),
        Idea("register_partials+tile_width", (
            ("Two things may be worth testing for {op}: keeping partial sums in registers across the {axis}, and "
             "tiles {n} wide.",
             "Two things are still untested for {op}: keeping partial sums in registers across the {axis}, and "
             "tiles {n} wide.",
             "Two things must be tested for {op} before anything else: keeping partial sums in registers across "
             "the {axis}, and tiles {n} wide."),
            ("It is unclear whether register-resident partial sums along the {axis} would help {op}, and equally "
             "unclear whether a tile width of {n} would.",
             "Still unknown for {op}: whether register-resident partial sums along the {axis} help, and whether a "
             "tile width of {n} does.",
             "The next attempt must answer both open points about {op} first: whether register-resident partial "
             "sums along the {axis} help, and whether a tile width of {n} does."),
        ), parts=("register_partials", "tile_width")),
    ),
}

# Sentences that are not claims (no ground truth): what a writer adds around the content.
BOILERPLATE: tuple[str, ...] = (
    "These notes are for whoever picks this up next.",
    "Written at the end of the attempt, from what was tried.",
    "Details below.",
    "Read this before starting.",
    "The notes are in no particular order.",
    "Kept short on purpose.",
    "Corrections are welcome in the next revision.",
    "Some of this repeats the previous notes.",
    "This is what I would want to know if I were starting again.",
    "More detail follows.",
    "That is most of it.",
    "Good luck with it.",
)

# Section headings by category group (two wordings each), in the order sections appear; categories not listed
# (a user's own taxonomy) go under "other".
SECTION_HEADINGS: dict[str, tuple[str, str]] = {
    "workload": ("The workload", "Problem shape"),
    "worked": ("What worked", "Results"),
    "hardware": ("Hardware mapping", "Launch configuration"),
    "dsl": ("DSL notes", "Toolchain quirks"),
    "checking": ("How to check a kernel", "Testing"),
    "failures": ("What went wrong", "Failures"),
    "dead_ends": ("Dead ends", "Not worth trying"),
    "open": ("Open questions", "Next steps"),
    "other": ("General observations", "Other notes"),
}
SECTION_OF: dict[str, str] = {
    "workload_census": "workload",
    "performance_evidence": "worked",
    "verified_reformulation": "worked",
    "hardware_mapping": "hardware",
    "dsl_specific_detail": "dsl",
    "verification_recipe": "checking",
    "bounded_failure_diagnosis": "failures",
    "unsupported_closure": "dead_ends",
    "unverified_reformulation": "open",
    "open_question": "open",
    "unsupported_claim": "other",
}

TITLES: tuple[str, ...] = ("Kernel notes", "Notes for the next attempt", "What this attempt learned", "SKILL notes")
