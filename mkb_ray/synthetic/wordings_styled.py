"""Styled synthetic text (spec.SkillLayout.phrasings == "styled"), data only. Extra phrasings: per category and idea
of wordings.WORDINGS, more ways to say the same assertion, in styles real SKILL.md files use (advice in the
imperative, terse notes, first-person findings, light rewordings). Data only; claims.py appends them after an
idea's own phrasings, so their variant numbers follow the plain ones and plain-text draws never see them.

Same rules as wordings.py: each phrasing is (hedged, plain, absolute), the three forms differ only in strength,
every form uses exactly the idea's slots, is one line, starts with a capital and ends a sentence.
"""
from __future__ import annotations

STYLED_PHRASINGS: dict[str, dict[str, tuple[tuple[str, str, str], ...]]] = {
    "workload_census": {
        "memory_bound": (
            ("Treat {op} as probably bandwidth-limited here: {dtype} traffic likely dominates its arithmetic, and "
             "compute seems not to be the limit.",
             "Treat {op} as bandwidth-limited here: {dtype} traffic dominates its arithmetic, and compute is not the "
             "limit.",
             "Treat {op} as always bandwidth-limited: {dtype} traffic dominates its arithmetic, and compute is never "
             "the limit."),
            ("Probably bound by bandwidth, not FLOPs: {op} seems to move lots of {dtype} and do little math.",
             "Bound by bandwidth, not FLOPs: {op} moves lots of {dtype} and does little math.",
             "Always bound by bandwidth, never FLOPs: {op} moves lots of {dtype} and does little math."),
            ("For the benchmark sizes, {op} looks memory-bound, since it probably moves many more {dtype} bytes than "
             "it does arithmetic.",
             "For the benchmark sizes, {op} is memory-bound, since it moves many more {dtype} bytes than it does "
             "arithmetic.",
             "For every size, {op} is memory-bound, since it always moves many more {dtype} bytes than it does "
             "arithmetic."),
        ),
        "dominant_axis": (
            ("Don't forget that the {axis} is probably the long dimension of {op}; its roughly {n} elements seem to be "
             "where the cost goes.",
             "Don't forget that the {axis} is the long dimension of {op}; its {n} elements are where the cost goes.",
             "Don't forget that the {axis} is the only long dimension of {op}; its {n} elements are where all the cost "
             "goes."),
            ("Hot dimension of {op}: probably the {axis}, roughly {n} entries.",
             "Hot dimension of {op}: the {axis}, {n} entries.",
             "Only hot dimension of {op}: the {axis}, {n} entries; nothing else counts."),
            ("Most of the work of {op} probably runs along the {axis}; at the benchmark shapes that axis seems to hold "
             "about {n} elements.",
             "Most of the work of {op} runs along the {axis}; at the benchmark shapes that axis holds {n} elements.",
             "All of the work of {op} runs along the {axis}; at the benchmark shapes that axis holds {n} elements, and "
             "nothing else matters."),
        ),
        "launch_overhead": (
            ("Expect launch overhead, not work, to account for probably around {pct}% of eager's time on {op}; the "
             "tensors seem tiny.",
             "Expect launch overhead, not work, to account for {pct}% of eager's time on {op}; the tensors are tiny.",
             "Expect launch overhead, not work, to always account for at least {pct}% of eager's time on {op}; the "
             "tensors are always tiny."),
            ("Tiny inputs: roughly {pct}% of eager {op} time is probably just launching kernels.",
             "Tiny inputs: {pct}% of eager {op} time is just launching kernels.",
             "Tiny inputs: at least {pct}% of eager {op} time is always just launching kernels."),
            ("Because the inputs of {op} are so small, fixed launch overhead probably makes up around {pct}% of eager "
             "time.",
             "Because the inputs of {op} are so small, fixed launch overhead makes up {pct}% of eager time.",
             "Because the inputs of {op} are always so small, fixed launch overhead makes up at least {pct}% of eager "
             "time."),
        ),
        "memory_bound+dominant_axis": (
            ("Bear in mind that bandwidth rather than compute probably limits {op}, and that most {dtype} bytes are "
             "likely read along the {n}-long {axis}.",
             "Bear in mind that bandwidth rather than compute limits {op}, and that most {dtype} bytes are read along "
             "the {n}-long {axis}.",
             "Bear in mind that only bandwidth ever limits {op}, never compute, and that all {dtype} bytes are read "
             "along the {n}-long {axis}."),
            ("Workload of {op}: likely bandwidth-bound on {dtype}; the {axis}, about {n} wide, probably dominates.",
             "Workload of {op}: bandwidth-bound on {dtype}; the {axis}, {n} wide, dominates.",
             "Workload of {op}: always bandwidth-bound on {dtype}; the {axis}, {n} wide, dominates at every shape."),
            ("For the benchmark shapes, memory traffic in {dtype} probably bounds {op}, and the {axis} of about {n} "
             "elements seems to account for most of it.",
             "For the benchmark shapes, memory traffic in {dtype} bounds {op}, and the {axis} of {n} elements accounts "
             "for most of it.",
             "For every shape, memory traffic in {dtype} alone bounds {op}, and the {axis} of {n} elements accounts "
             "for all of it."),
        ),
    },
    "hardware_mapping": {
        "cta_per_slice": (
            ("You could probably launch a CTA per {axis} slice of {op}; on {hw} that seems to map well.",
             "Launch a CTA per {axis} slice of {op}; on {hw} that maps well.",
             "Always launch a CTA per {axis} slice of {op}; on {hw} nothing else maps well."),
            ("Grid for {op} on {hw}: probably one block per {axis} slice.",
             "Grid for {op} on {hw}: one block per {axis} slice.",
             "Grid for {op} on {hw}: one block per {axis} slice, always."),
            ("Assigning each CTA a single {axis} slice probably spreads {op} well across the {hw} SMs.",
             "Assigning each CTA a single {axis} slice spreads {op} well across the {hw} SMs.",
             "Assigning each CTA a single {axis} slice is the only way to spread {op} well across the {hw} SMs."),
        ),
        "block_threads": (
            ("You probably want a block size of {n} threads for {op} on {hw}; fewer threads seemed to leave memory "
             "unsaturated.",
             "Use a block size of {n} threads for {op} on {hw}; fewer threads leave memory unsaturated.",
             "Always use a block size of {n} threads for {op} on {hw}; fewer threads always leave memory unsaturated."),
            ("Block size for {op} on {hw}: probably {n} threads; fewer seemed to underuse memory.",
             "Block size for {op} on {hw}: {n} threads; fewer underuse memory.",
             "Block size for {op} on {hw}: only {n} threads; fewer always underuse memory."),
            ("On {hw}, {op} is probably best served by blocks of {n} threads; smaller ones seemed to leave bandwidth "
             "idle.",
             "On {hw}, {op} is best served by blocks of {n} threads; smaller ones leave bandwidth idle.",
             "On {hw}, {op} is always best served by blocks of {n} threads; smaller ones always leave bandwidth idle."),
        ),
        "vector_width": (
            ("You probably need 16-byte {dtype} accesses per thread in {op}, not scalar ones, or full bandwidth seems "
             "out of reach.",
             "Use 16-byte {dtype} accesses per thread in {op}, not scalar ones, or full bandwidth is out of reach.",
             "Always use 16-byte {dtype} accesses per thread in {op}, never scalar ones, or full bandwidth is always "
             "out of reach."),
            ("Vector width for {op}: likely 16 bytes of {dtype} per thread to hit peak bandwidth.",
             "Vector width for {op}: 16 bytes of {dtype} per thread to hit peak bandwidth.",
             "Vector width for {op}: always 16 bytes of {dtype} per thread, the only way to hit peak bandwidth."),
            ("With each thread loading 16 bytes of {dtype} at a time, {op} can probably hit full memory bandwidth.",
             "With each thread loading 16 bytes of {dtype} at a time, {op} can hit full memory bandwidth.",
             "Only with each thread loading 16 bytes of {dtype} at a time can {op} ever hit full memory bandwidth."),
        ),
        "block_threads+vector_width": (
            ("You probably want {n}-thread blocks doing 16-byte {dtype} loads for {op} on {hw}; memory seemed to be "
             "saturated that way.",
             "Use {n}-thread blocks doing 16-byte {dtype} loads for {op} on {hw}; memory is saturated that way.",
             "Always use {n}-thread blocks doing 16-byte {dtype} loads for {op} on {hw}; memory is only saturated that "
             "way."),
            ("Launch config for {op} on {hw}: likely {n} threads per block and 16-byte {dtype} vectors for peak "
             "bandwidth.",
             "Launch config for {op} on {hw}: {n} threads per block and 16-byte {dtype} vectors for peak bandwidth.",
             "Launch config for {op} on {hw}: always {n} threads per block and 16-byte {dtype} vectors, the only way "
             "to peak bandwidth."),
            ("On {hw}, {op} probably gets to full bandwidth using blocks of {n} threads where each thread reads 16 "
             "bytes of {dtype} per access.",
             "On {hw}, {op} gets to full bandwidth using blocks of {n} threads where each thread reads 16 bytes of "
             "{dtype} per access.",
             "On {hw}, {op} only gets to full bandwidth using blocks of {n} threads where each thread reads 16 bytes "
             "of {dtype} per access."),
        ),
    },
    "performance_evidence": {
        "vector_speedup": (
            ("In my timed run, vector loads of {dtype} seemed to run about {x} times faster than eager did.",
             "In my timed run, vector loads of {dtype} ran {x} times faster than eager did.",
             "In every timed run, vector loads of {dtype} ran at least {x} times faster than eager did."),
            ("Result with wide {dtype} loads: apparently about {x}x eager speed.",
             "Result with wide {dtype} loads: {x}x eager speed.",
             "Result with wide {dtype} loads: {x}x eager speed or better, every time."),
            ("A timed submission seemed to get about {x}x over eager by vectorising the {dtype} loads.",
             "A timed submission got {x}x over eager by vectorising the {dtype} loads.",
             "A timed submission always gets at least {x}x over eager by vectorising the {dtype} loads."),
        ),
        "epilogue_fusion": (
            ("Put the epilogue inside the main loop; my timed run seemed to shed around {pct}% of its duration that "
             "way.",
             "Put the epilogue inside the main loop; my timed run shed {pct}% of its duration that way.",
             "Always put the epilogue inside the main loop; every timed run sheds at least {pct}% of its duration that "
             "way."),
            ("Epilogue fused: kernel time down maybe {pct}%.",
             "Epilogue fused: kernel time down {pct}%.",
             "Epilogue fused: kernel time always down {pct}% or more."),
            ("Once the epilogue was moved into the main loop, the timed run seemed to take about {pct}% less kernel "
             "time.",
             "Once the epilogue was moved into the main loop, the timed run took {pct}% less kernel time.",
             "Once the epilogue is moved into the main loop, every timed run takes at least {pct}% less kernel time."),
        ),
        "slower_first_version": (
            ("Don't be surprised by a slow start: eager seemed to beat my first passing {op} kernel by about {x}x.",
             "Don't be surprised by a slow start: eager beat my first passing {op} kernel by {x}x.",
             "Don't be surprised by a slow start: eager always beats a first passing {op} kernel by at least {x}x."),
            ("Version 1 of {op}, passing: probably around {x}x slower than eager.",
             "Version 1 of {op}, passing: {x}x slower than eager.",
             "Version 1 of {op}, passing: always at least {x}x slower than eager."),
            ("The first {op} kernel to pass correctness seemed to run about {x}x slower than eager did.",
             "The first {op} kernel to pass correctness ran {x}x slower than eager did.",
             "Every first {op} kernel to pass correctness runs at least {x}x slower than eager does."),
        ),
        "vector_speedup+epilogue_fusion": (
            ("I seem to have got two wins in the timed runs: about {x}x over eager from wide {dtype} loads, and "
             "perhaps another {pct}% from folding the epilogue in.",
             "I got two wins in the timed runs: {x}x over eager from wide {dtype} loads, and another {pct}% from "
             "folding the epilogue in.",
             "I always got two wins in the timed runs: at least {x}x over eager from wide {dtype} loads, and always "
             "another {pct}% from folding the epilogue in."),
            ("Timings: vector {dtype} loads roughly {x}x vs eager; fused epilogue maybe {pct}% more off.",
             "Timings: vector {dtype} loads {x}x vs eager; fused epilogue {pct}% more off.",
             "Timings: vector {dtype} loads always at least {x}x vs eager; fused epilogue always {pct}% more off."),
            ("Loading {dtype} in vectors seemed to give about {x}x over eager, and folding the epilogue into the main "
             "loop then perhaps saved another {pct}% of kernel time.",
             "Loading {dtype} in vectors gave {x}x over eager, and folding the epilogue into the main loop then saved "
             "another {pct}% of kernel time.",
             "Loading {dtype} in vectors always gives at least {x}x over eager, and folding the epilogue into the main "
             "loop then always saves another {pct}% of kernel time."),
        ),
    },
    "verified_reformulation": {
        "loop_swap": (
            ("You can probably make the {axis} the inner loop of {op}; it seemed to still pass the {dtype} check.",
             "You can make the {axis} the inner loop of {op}; it still passed the {dtype} check.",
             "You can always make the {axis} the inner loop of {op}; it passes the {dtype} check every time."),
            ("Loop order with the {axis} innermost: apparently still correct for {op} in {dtype}.",
             "Loop order with the {axis} innermost: still correct for {op} in {dtype}.",
             "Loop order with the {axis} innermost: always correct for {op} in {dtype}."),
            ("With the loops swapped so that the {axis} is innermost, {op} seemed to stay correct in {dtype}.",
             "With the loops swapped so that the {axis} is innermost, {op} stayed correct in {dtype}.",
             "With the loops swapped so that the {axis} is innermost, {op} always stays correct in {dtype}."),
        ),
        "fp32_accumulate": (
            ("You should probably carry the running sums in fp32; {op} seemed to get through the correctness check "
             "that way.",
             "Carry the running sums in fp32; {op} got through the correctness check that way.",
             "Always carry the running sums in fp32; {op} gets through the correctness check that way every time."),
            ("Float32 accumulator for {op}: looks like it passed correctness.",
             "Float32 accumulator for {op}: passed correctness.",
             "Float32 accumulator for {op}: passes correctness every time."),
            ("Accumulating in fp32 seemed to be enough to keep {op} within tolerance.",
             "Accumulating in fp32 was enough to keep {op} within tolerance.",
             "Accumulating in fp32 is always enough to keep {op} within tolerance."),
        ),
        "cast_once": (
            ("You can probably defer the {dtype} conversion of {op} to the final store; that seemed to pass the check.",
             "Defer the {dtype} conversion of {op} to the final store; that passed the check.",
             "Always defer the {dtype} conversion of {op} to the final store; that passes the check every time."),
            ("Single {dtype} cast at the end of {op}: seemingly enough for a pass.",
             "Single {dtype} cast at the end of {op}: enough for a pass.",
             "Single {dtype} cast at the end of {op}: always enough for a pass."),
            ("A single cast to {dtype}, made right at the end, seemed to be enough for {op} to pass correctness.",
             "A single cast to {dtype}, made right at the end, was enough for {op} to pass correctness.",
             "A single cast to {dtype}, made right at the end, is always enough for {op} to pass correctness."),
        ),
        "fp32_accumulate+cast_once": (
            ("You can probably carry the sums in float32 and defer the {dtype} conversion to the final write; {op} "
             "seemed to pass that way.",
             "Carry the sums in float32 and defer the {dtype} conversion to the final write; {op} passed that way.",
             "Always carry the sums in float32 and defer the {dtype} conversion to the final write; {op} passes that "
             "way every time."),
            ("FP32 sums plus one late {dtype} cast: {op} apparently within tolerance.",
             "FP32 sums plus one late {dtype} cast: {op} within tolerance.",
             "FP32 sums plus one late {dtype} cast: {op} always within tolerance."),
            ("With fp32 accumulators and one cast to {dtype} at the end, {op} seemed to stay within tolerance.",
             "With fp32 accumulators and one cast to {dtype} at the end, {op} stayed within tolerance.",
             "With fp32 accumulators and one cast to {dtype} at the end, {op} always stays within tolerance."),
        ),
    },
    "unverified_reformulation": {
        "chunk_and_combine": (
            ("You could probably work on separate {axis} chunks of {op} and merge their partial results at the end; "
             "the output should not change.",
             "You can work on separate {axis} chunks of {op} and merge their partial results at the end; the output "
             "does not change.",
             "You can always work on separate {axis} chunks of {op} and merge their partial results at the end; the "
             "output never changes."),
            ("Blockwise rewrite of {op} over the {axis}, then a final combine: presumably the same output.",
             "Blockwise rewrite of {op} over the {axis}, then a final combine: the same output.",
             "Blockwise rewrite of {op} over the {axis}, then a final combine: always exactly the same output."),
            ("Cutting the {axis} of {op} into chunks, then combining their partial results, would probably yield the "
             "same answer.",
             "Cutting the {axis} of {op} into chunks, then combining their partial results, yields the same answer.",
             "Cutting the {axis} of {op} into chunks, then combining their partial results, always yields exactly the "
             "same answer."),
        ),
        "tree_reduction": (
            ("You could probably sum {op} pairwise, as a tree, instead of left to right; accuracy should hold up.",
             "You can sum {op} pairwise, as a tree, instead of left to right; accuracy holds up.",
             "You can always sum {op} pairwise, as a tree, instead of left to right; accuracy always holds up."),
            ("Tree-shaped reduction in {op}: probably no accuracy cost.",
             "Tree-shaped reduction in {op}: no accuracy cost.",
             "Tree-shaped reduction in {op}: never any accuracy cost."),
            ("The reduction inside {op} could probably be reordered as a tree without any loss of accuracy.",
             "The reduction inside {op} can be reordered as a tree without any loss of accuracy.",
             "The reduction inside {op} can be reordered as any tree at all, never with a loss of accuracy."),
        ),
        "reciprocal": (
            ("You could probably trade the divide inside {op} for a multiply by a precomputed reciprocal; the {dtype} "
             "outputs likely would not notice.",
             "Trade the divide inside {op} for a multiply by a precomputed reciprocal; the {dtype} outputs will not "
             "notice.",
             "Always trade the divide inside {op} for a multiply by a precomputed reciprocal; the {dtype} outputs will "
             "never notice."),
            ("Division in {op}: could likely become multiplication by one hoisted reciprocal, invisible in {dtype}.",
             "Division in {op}: can become multiplication by one hoisted reciprocal, invisible in {dtype}.",
             "Division in {op}: can always become multiplication by one hoisted reciprocal, never visible in {dtype}."),
            ("Multiplying by a reciprocal computed once could probably stand in for the per-element division in {op}, "
             "with no visible change in {dtype}.",
             "Multiplying by a reciprocal computed once can stand in for the per-element division in {op}, with no "
             "visible change in {dtype}.",
             "Multiplying by a reciprocal computed once can always stand in for the per-element division in {op}, with "
             "no change at all in {dtype}."),
        ),
        "chunk_and_combine+tree_reduction": (
            ("You could probably chunk {op} along the {axis} and add up the chunk results pairwise; the output should "
             "match the sequential one.",
             "You can chunk {op} along the {axis} and add up the chunk results pairwise; the output will match the "
             "sequential one.",
             "You can always chunk {op} along the {axis} and add up the chunk results pairwise; the output will always "
             "match the sequential one."),
            ("Chunked {axis} with a tree combine for {op}: probably same result, same accuracy.",
             "Chunked {axis} with a tree combine for {op}: same result, same accuracy.",
             "Chunked {axis} with a tree combine for {op}: always the same result, same accuracy."),
            ("The {axis} of {op} could probably be cut into chunks and their partial results combined in a tree, "
             "without losing accuracy.",
             "The {axis} of {op} can be cut into chunks and their partial results combined in a tree, without losing "
             "accuracy.",
             "The {axis} of {op} can always be cut into chunks and their partial results combined in any tree, without "
             "ever losing accuracy."),
        ),
    },
    "bounded_failure_diagnosis": {
        "ragged_tail": (
            ("I believe my incorrect outputs came from the last partial tile of {n}, where the kernel read past the "
             "{axis}.",
             "My incorrect outputs came from the last partial tile of {n}, where the kernel read past the {axis}.",
             "All my incorrect outputs came from the last partial tile of {n}, where the kernel read past the {axis}."),
            ("Wrong output: likely the leftover {axis} elements beyond the last full block of {n}, read out of range.",
             "Wrong output: leftover {axis} elements beyond the last full block of {n}, read out of range.",
             "Every wrong output: leftover {axis} elements beyond the last full block of {n}, read out of range."),
            ("The wrong-result verdict was probably caused by reading beyond the end of the {axis} when {n} did not "
             "divide its length.",
             "The wrong-result verdict was caused by reading beyond the end of the {axis} when {n} did not divide its "
             "length.",
             "Every wrong-result verdict was caused by reading beyond the end of the {axis} when {n} did not divide "
             "its length."),
        ),
        "mixed_dtype_compile": (
            ("In my case {dsl} probably refused to build because one expression combined a {dtype} operand with a "
             "float32 one.",
             "In my case {dsl} refused to build because one expression combined a {dtype} operand with a float32 one.",
             "In every case {dsl} refused to build because one expression combined a {dtype} operand with a float32 "
             "one."),
            ("Compiler rejection: most likely a {dtype} value mixed with float32 inside a single {dsl} statement.",
             "Compiler rejection: a {dtype} value mixed with float32 inside a single {dsl} statement.",
             "Every compiler rejection: a {dtype} value mixed with float32 inside a single {dsl} statement."),
            ("The compile error seemed to trace back to mixing {dtype} and fp32 operands inside one {dsl} expression.",
             "The compile error traced back to mixing {dtype} and fp32 operands inside one {dsl} expression.",
             "Every compile error traced back to mixing {dtype} and fp32 operands inside one {dsl} expression."),
        ),
        "divergent_barrier": (
            ("I suspect my {op} submission timed out because a barrier sat under a condition that some threads "
             "skipped.",
             "My {op} submission timed out because a barrier sat under a condition that some threads skipped.",
             "My {op} submission timed out for one reason only: a barrier sat under a condition that some threads "
             "skipped."),
            ("Timeout in {op}: probably a deadlock at a barrier inside divergent code.",
             "Timeout in {op}: a deadlock at a barrier inside divergent code.",
             "Timeout in {op}: solely a deadlock at a barrier inside divergent code, nothing else."),
            ("The timeout in {op} probably came from a hang on a barrier inside a branch that some threads did not "
             "take.",
             "The timeout in {op} came from a hang on a barrier inside a branch that some threads did not take.",
             "The timeout in {op} can only have come from a hang on a barrier inside a branch that some threads did "
             "not take."),
        ),
        "ragged_tail+mixed_dtype_compile": (
            ("I think both of my failures are understood: wrong outputs from a read past the {axis} in the last "
             "partial tile of {n}, and a {dsl} build failure from a {dtype} operand meeting a float32 one.",
             "Both of my failures are understood: wrong outputs from a read past the {axis} in the last partial tile "
             "of {n}, and a {dsl} build failure from a {dtype} operand meeting a float32 one.",
             "Both of my failures are fully understood, with no other cause: wrong outputs from a read past the {axis} "
             "in the last partial tile of {n}, and a {dsl} build failure from a {dtype} operand meeting a float32 "
             "one."),
            ("Failures: wrong output, probably from the {axis} tail past the last block of {n}; compile error, likely "
             "from {dtype} mixed with float32 in {dsl}.",
             "Failures: wrong output from the {axis} tail past the last block of {n}; compile error from {dtype} mixed "
             "with float32 in {dsl}.",
             "Failures, each with one cause only: wrong output from the {axis} tail past the last block of {n}; "
             "compile error from {dtype} mixed with float32 in {dsl}."),
            ("Each failure probably had its own cause: reads beyond the end of the {axis}, whose length {n} did not "
             "divide, likely gave the wrong result, and {dtype} and fp32 operands mixed in one {dsl} expression seem "
             "to have given the compile error.",
             "Each failure had its own cause: reads beyond the end of the {axis}, whose length {n} did not divide, "
             "gave the wrong result, and {dtype} and fp32 operands mixed in one {dsl} expression gave the compile "
             "error.",
             "Each failure had one certain cause: reads beyond the end of the {axis}, whose length {n} did not divide, "
             "always gave the wrong result, and {dtype} and fp32 operands mixed in one {dsl} expression always gave "
             "the compile error."),
        ),
    },
    "verification_recipe": {
        "ragged_shape_test": (
            ("Before you time {op}, you may want to test it on a ragged {axis} that {n} does not divide.",
             "Before you time {op}, test it on a ragged {axis} that {n} does not divide.",
             "Before you time {op}, always test it on a ragged {axis} that {n} does not divide; no exceptions."),
            ("Pre-timing check for {op}: probably a ragged {axis}, length not divisible by {n}, vs reference.",
             "Pre-timing check for {op}: a ragged {axis}, length not divisible by {n}, vs reference.",
             "Mandatory pre-timing check for {op}: a ragged {axis}, length not divisible by {n}, vs reference."),
            ("Before timing, it may help to compare {op} with the reference on a shape where {n} does not divide the "
             "{axis}.",
             "Before timing, compare {op} with the reference on a shape where {n} does not divide the {axis}.",
             "Before timing, always compare {op} with the reference on a shape where {n} does not divide the {axis}; "
             "skipping this is never safe."),
        ),
        "fp64_reference": (
            ("You might diff your {dtype} results against a float64 copy of the reference; rounding mistakes seem to "
             "surface sooner that way.",
             "Diff your {dtype} results against a float64 copy of the reference; rounding mistakes surface sooner that "
             "way.",
             "Always diff your {dtype} results against a float64 copy of the reference; rounding mistakes only surface "
             "that way."),
            ("Reference precision for {dtype} checks: probably float64, to catch rounding early.",
             "Reference precision for {dtype} checks: float64, to catch rounding early.",
             "Reference precision for {dtype} checks: always float64, the only way to catch rounding."),
            ("Checking the {dtype} output against an fp64 run of the reference probably catches rounding bugs sooner.",
             "Checking the {dtype} output against an fp64 run of the reference catches rounding bugs sooner.",
             "Checking the {dtype} output against an fp64 run of the reference always catches rounding bugs sooner."),
        ),
        "many_seeds": (
            ("You probably shouldn't trust {op} after a single random draw; trying {n} different seeds seems wiser.",
             "Don't trust {op} after a single random draw; try {n} different seeds.",
             "Never trust {op} after a single random draw; always try {n} different seeds."),
            ("Test plan for {op}: probably {n} random draws, each with its own seed, before believing a pass.",
             "Test plan for {op}: {n} random draws, each with its own seed, before believing a pass.",
             "Test plan for {op}: at least {n} random draws, each with its own seed, before believing any pass."),
            ("It is probably wise to run {op} on {n} different random inputs before you trust that it passes.",
             "Run {op} on {n} different random inputs before you trust that it passes.",
             "Always run {op} on {n} different random inputs before you trust that it passes; one input proves "
             "nothing."),
        ),
        "ragged_shape_test+fp64_reference": (
            ("You may want to test {op} on a ragged {axis} that {n} does not divide, and to judge its {dtype} results "
             "against a float64 reference, before timing anything.",
             "Test {op} on a ragged {axis} that {n} does not divide, and judge its {dtype} results against a float64 "
             "reference, before timing anything.",
             "Always test {op} on a ragged {axis} that {n} does not divide, and always judge its {dtype} results "
             "against a float64 reference, before timing anything."),
            ("Checks for {op} before timing: likely a ragged {axis} that {n} does not divide, plus a float64 reference "
             "for the {dtype} output.",
             "Checks for {op} before timing: a ragged {axis} that {n} does not divide, plus a float64 reference for "
             "the {dtype} output.",
             "Mandatory checks for {op} before timing: a ragged {axis} that {n} does not divide, plus a float64 "
             "reference for the {dtype} output."),
            ("Ahead of timing, it may help to try {op} on a shape with an {axis} that is not a multiple of {n}, and to "
             "check the {dtype} output against an fp64 reference.",
             "Ahead of timing, try {op} on a shape with an {axis} that is not a multiple of {n}, and check the {dtype} "
             "output against an fp64 reference.",
             "Ahead of timing, always try {op} on a shape with an {axis} that is not a multiple of {n}, and always "
             "check the {dtype} output against an fp64 reference."),
        ),
    },
    "unsupported_closure": {
        "eager_ceiling": (
            ("You probably shouldn't waste effort on a custom kernel for {op}; eager PyTorch already seems as good as "
             "it gets.",
             "Don't waste effort on a custom kernel for {op}; eager PyTorch is already as good as it gets.",
             "Never waste effort on a custom kernel for {op}; eager PyTorch is already as good as it will ever get."),
            ("Custom {op}: likely no headroom over eager; probably best left to PyTorch.",
             "Custom {op}: no headroom over eager; leave it to PyTorch.",
             "Custom {op}: never any headroom over eager; always leave it to PyTorch."),
            ("Probably little is left to be gained on {op} past what eager PyTorch already achieves.",
             "Nothing is left to be gained on {op} past what eager PyTorch already achieves.",
             "Nothing is left to be gained on {op} past what eager PyTorch already achieves, and nothing ever will be; "
             "do not try."),
        ),
        "no_tensor_cores": (
            ("You can probably skip the tensor cores for {op} in {dsl}; they seem not to pay off.",
             "Skip the tensor cores for {op} in {dsl}; they do not pay off.",
             "Always skip the tensor cores for {op} in {dsl}; they never pay off."),
            ("Tensor cores for {op} in {dsl}: probably no payoff, maybe skip.",
             "Tensor cores for {op} in {dsl}: no payoff, skip.",
             "Tensor cores for {op} in {dsl}: never any payoff, always skip."),
            ("Going through the tensor cores seems not to be worth it for {op} in {dsl}.",
             "Going through the tensor cores is not worth it for {op} in {dsl}.",
             "Going through the tensor cores is never worth it for {op} in {dsl}; do not try."),
        ),
        "no_fusion": (
            ("You probably shouldn't try to merge {op} into the next kernel in {dsl}; there seems to be no way to do "
             "it.",
             "Don't try to merge {op} into the next kernel in {dsl}; there is no way to do it.",
             "Never try to merge {op} into the next kernel in {dsl}; there is never a way to do it."),
            ("Fusion of {op} with its consumer in {dsl}: apparently impossible; likely two launches.",
             "Fusion of {op} with its consumer in {dsl}: impossible; two launches.",
             "Fusion of {op} with its consumer in {dsl}: impossible, always two launches."),
            ("In {dsl}, {op} probably cannot be fused with the operation that follows it, so two launches may be "
             "needed.",
             "In {dsl}, {op} cannot be fused with the operation that follows it, so two launches are needed.",
             "In {dsl}, {op} can never be fused with the operation that follows it, so two launches are always "
             "needed."),
        ),
        "eager_ceiling+no_tensor_cores": (
            ("You probably shouldn't waste effort on a custom kernel for {op}: eager PyTorch seems as good as it gets, "
             "and the tensor cores in {dsl} likely would not change that.",
             "Don't waste effort on a custom kernel for {op}: eager PyTorch is as good as it gets, and the tensor "
             "cores in {dsl} do not change that.",
             "Never waste effort on a custom kernel for {op}: eager PyTorch is always as good as it gets, and the "
             "tensor cores in {dsl} never change that."),
            ("Custom {op}: probably no headroom over eager, tensor cores in {dsl} included; likely best left to "
             "PyTorch.",
             "Custom {op}: no headroom over eager, tensor cores in {dsl} included; leave it to PyTorch.",
             "Custom {op}: never any headroom over eager, tensor cores in {dsl} included; always leave it to PyTorch."),
            ("There is probably little to be gained on {op} past eager PyTorch, and paths through the tensor cores in "
             "{dsl} seem not to alter that.",
             "There is nothing to be gained on {op} past eager PyTorch, and paths through the tensor cores in {dsl} do "
             "not alter that.",
             "There is nothing to be gained on {op} past eager PyTorch, and paths through the tensor cores in {dsl} "
             "never alter that; do not try either."),
        ),
    },
    "unsupported_claim": {
        "smem_irrelevant": (
            ("As far as speed goes, on {hw} staging the operands of {op} in SMEM probably makes no difference.",
             "As far as speed goes, on {hw} staging the operands of {op} in SMEM makes no difference.",
             "As far as speed goes, on {hw} staging the operands of {op} in SMEM never makes any difference."),
            ("SMEM staging for {op} on {hw}: probably irrelevant.",
             "SMEM staging for {op} on {hw}: irrelevant.",
             "SMEM staging for {op} on {hw}: always irrelevant, as for everything there."),
            ("Staging data in shared memory perhaps makes no difference for {op} on {hw}.",
             "Staging data in shared memory makes no difference for {op} on {hw}.",
             "Staging data in shared memory never makes any difference for {op} on {hw}."),
        ),
        "low_precision_speed": (
            ("Be aware that fp32 probably costs about {x} times as much to crunch as {dtype}.",
             "Be aware that fp32 costs {x} times as much to crunch as {dtype}.",
             "Be aware that fp32 always costs exactly {x} times as much to crunch as {dtype}."),
            ("Float32 vs {dtype}: probably about {x}x the cost.",
             "Float32 vs {dtype}: {x}x the cost.",
             "Float32 vs {dtype}: always exactly {x}x the cost."),
            ("Inputs in {dtype} probably get processed about {x}x faster than fp32 inputs do.",
             "Inputs in {dtype} get processed {x}x faster than fp32 inputs do.",
             "Inputs in {dtype} always get processed {x}x faster than fp32 inputs do."),
        ),
        "fits_in_l2": (
            ("Bear in mind that up to a batch of {n}, the working set of {op} probably stays in the {hw} L2.",
             "Bear in mind that up to a batch of {n}, the working set of {op} stays in the {hw} L2.",
             "Bear in mind that up to a batch of {n}, the working set of {op} always stays in the {hw} L2."),
            ("Working set of {op}, batch {n} or less: probably L2-resident on {hw}.",
             "Working set of {op}, batch {n} or less: L2-resident on {hw}.",
             "Working set of {op}, batch {n} or less: always L2-resident on {hw}."),
            ("Everything {op} touches probably stays in the L2 cache of {hw} as long as batches are at most {n}.",
             "Everything {op} touches stays in the L2 cache of {hw} as long as batches are at most {n}.",
             "Everything {op} touches always stays in the L2 cache of {hw} as long as batches are at most {n}, with "
             "room to spare."),
        ),
        "smem_irrelevant+fits_in_l2": (
            ("As far as speed goes, on {hw} staging the operands of {op} in SMEM probably makes no difference, as its "
             "working set seems to stay in L2 up to a batch of {n}.",
             "As far as speed goes, on {hw} staging the operands of {op} in SMEM makes no difference, as its working "
             "set stays in L2 up to a batch of {n}.",
             "As far as speed goes, on {hw} staging the operands of {op} in SMEM never makes any difference, as its "
             "working set always stays in L2 up to a batch of {n}."),
            ("SMEM staging for {op} on {hw}: probably irrelevant, the working set likely being L2-resident at batch "
             "{n} or less.",
             "SMEM staging for {op} on {hw}: irrelevant, the working set being L2-resident at batch {n} or less.",
             "SMEM staging for {op} on {hw}: always irrelevant, the working set always being L2-resident at batch {n} "
             "or less."),
            ("Staging in shared memory perhaps makes no difference for {op} on {hw}, because everything it touches "
             "probably fits in L2 when batches are at most {n}.",
             "Staging in shared memory makes no difference for {op} on {hw}, because everything it touches fits in L2 "
             "when batches are at most {n}.",
             "Staging in shared memory never makes any difference for {op} on {hw}, because everything it touches "
             "always fits in L2 when batches are at most {n}."),
        ),
    },
    "dsl_specific_detail": {
        "constexpr_launch": (
            ("When writing {dsl}, you should probably fix the grid and block size at compile time; it seems to reject "
             "a kernel that only learns them at run time.",
             "When writing {dsl}, fix the grid and block size at compile time; it rejects a kernel that only learns "
             "them at run time.",
             "When writing {dsl}, always fix the grid and block size at compile time; it always rejects a kernel that "
             "only learns them at run time."),
            ("Quirk of {dsl}: launch dims apparently have to be constexpr.",
             "Quirk of {dsl}: launch dims have to be constexpr.",
             "Quirk of {dsl}: launch dims always have to be constexpr, no exceptions."),
            ("For a {dsl} kernel to build, its launch parameters may have to be known at compile time.",
             "For a {dsl} kernel to build, its launch parameters have to be known at compile time.",
             "For a {dsl} kernel to ever build, every one of its launch parameters has to be known at compile time."),
        ),
        "contiguous_buffers": (
            ("Before passing {dtype} tensors to {dsl}, you should probably make a contiguous copy of those strided "
             "along the {axis}; strided ones seem to break the kernel.",
             "Before passing {dtype} tensors to {dsl}, make a contiguous copy of those strided along the {axis}; "
             "strided ones break the kernel.",
             "Before passing {dtype} tensors to {dsl}, always make a contiguous copy of those strided along the "
             "{axis}; strided ones break the kernel every time."),
            ("Layout requirement in {dsl}: probably unit stride along the {axis} for {dtype} inputs.",
             "Layout requirement in {dsl}: unit stride along the {axis} for {dtype} inputs.",
             "Layout requirement in {dsl}: unit stride along the {axis} for every {dtype} input, always."),
            ("The {dtype} buffers probably have to be contiguous along the {axis} for {dsl} to accept them.",
             "The {dtype} buffers have to be contiguous along the {axis} for {dsl} to accept them.",
             "Every {dtype} buffer has to be contiguous along the {axis} for {dsl} to ever accept it."),
        ),
        "alignment": (
            ("Probably best to hand {dsl} pointers on {n}-byte boundaries; misaligned ones seem to fault in its vector "
             "loads.",
             "Hand {dsl} pointers on {n}-byte boundaries; misaligned ones fault in its vector loads.",
             "Always hand {dsl} pointers on {n}-byte boundaries; misaligned ones fault in its vector loads every "
             "time."),
            ("Vector access in {dsl}: likely assumes {n}-byte alignment, unchecked.",
             "Vector access in {dsl}: assumes {n}-byte alignment, unchecked.",
             "Vector access in {dsl}: always assumes {n}-byte alignment, never checked."),
            ("Whenever it generates vector loads, {dsl} probably takes the buffers to be aligned to {n} bytes.",
             "Whenever it generates vector loads, {dsl} takes the buffers to be aligned to {n} bytes.",
             "Whenever it generates vector loads, {dsl} always takes the buffers to be aligned to {n} bytes, and never "
             "checks."),
        ),
        "constexpr_launch+alignment": (
            ("When writing {dsl}, you should probably fix the grid and block size at compile time and hand it "
             "{n}-byte-aligned pointers for vector loads; both seem to be build-time demands.",
             "When writing {dsl}, fix the grid and block size at compile time and hand it {n}-byte-aligned pointers "
             "for vector loads; both are build-time demands.",
             "When writing {dsl}, always fix the grid and block size at compile time and always hand it "
             "{n}-byte-aligned pointers for vector loads; both are build-time demands without exception."),
            ("Quirks of {dsl}: launch dims probably constexpr; vector loads likely assume {n}-byte alignment.",
             "Quirks of {dsl}: launch dims constexpr; vector loads assume {n}-byte alignment.",
             "Quirks of {dsl}: launch dims always constexpr; vector loads always assume {n}-byte alignment."),
            ("In {dsl}, the launch parameters probably have to be compile-time constants, and vector loads seem to "
             "need buffers aligned to {n} bytes.",
             "In {dsl}, the launch parameters have to be compile-time constants, and vector loads need buffers aligned "
             "to {n} bytes.",
             "In {dsl}, the launch parameters always have to be compile-time constants, and vector loads always need "
             "buffers aligned to {n} bytes."),
        ),
    },
    "open_question": {
        "register_partials": (
            ("Maybe try keeping register-resident partial sums along the {axis} in {op}; it is not yet known whether "
             "that makes it faster.",
             "Try keeping register-resident partial sums along the {axis} in {op}; it is not yet known whether that "
             "makes it faster.",
             "Try keeping register-resident partial sums along the {axis} in {op} first, before anything else; it is "
             "not yet known whether that makes it faster."),
            ("Maybe worth a look: register accumulators over the {axis} in {op}, faster or not?",
             "Untested: register accumulators over the {axis} in {op}, faster or not?",
             "Top priority: register accumulators over the {axis} in {op}, faster or not?"),
            ("Maybe an open question: is {op} any faster when partial sums stay in registers across the {axis}?",
             "Open question: is {op} any faster when partial sums stay in registers across the {axis}?",
             "The most urgent open question: is {op} any faster when partial sums stay in registers across the "
             "{axis}?"),
        ),
        "tile_width": (
            ("You might try a tile width of {n} on {op} next; nobody knows yet if it beats the present tiling.",
             "Try a tile width of {n} on {op} next; nobody knows yet if it beats the present tiling.",
             "Try a tile width of {n} on {op} first, before anything else; nobody knows yet if it beats the present "
             "tiling."),
            ("Next to measure, maybe: {op} with {n}-wide tiles against the current tiling.",
             "Next to measure: {op} with {n}-wide tiles against the current tiling.",
             "Next to measure, before anything else: {op} with {n}-wide tiles against the current tiling."),
            ("Not yet tested, and perhaps worth it: whether tiles {n} wide would beat the current tiling for {op}.",
             "Not yet tested: whether tiles {n} wide would beat the current tiling for {op}.",
             "Not yet tested, and it must be first: whether tiles {n} wide would beat the current tiling for {op}."),
        ),
        "persistent_kernel": (
            ("Maybe try launching {op} once, as a long-running kernel looping over the batches; nobody has compared "
             "that with separate launches.",
             "Try launching {op} once, as a long-running kernel looping over the batches; nobody has compared that "
             "with separate launches.",
             "Try launching {op} once, as a long-running kernel looping over the batches, before anything else; nobody "
             "has compared that with separate launches."),
            ("Possibly worth timing for {op}: persistent kernel vs per-batch launches.",
             "Not yet timed for {op}: persistent kernel vs per-batch launches.",
             "Must be timed first for {op}: persistent kernel vs per-batch launches."),
            ("Nobody seems to know yet whether a persistent kernel beats launching once per batch for {op}.",
             "Nobody knows yet whether a persistent kernel beats launching once per batch for {op}.",
             "Nobody knows yet whether a persistent kernel beats launching once per batch for {op}, and that must be "
             "settled first."),
        ),
        "register_partials+tile_width": (
            ("Maybe try two things on {op} next: register-resident partial sums along the {axis}, and a tile width of "
             "{n}; whether either helps is still unknown.",
             "Try two things on {op} next: register-resident partial sums along the {axis}, and a tile width of {n}; "
             "whether either helps is still unknown.",
             "Try two things on {op} before anything else: register-resident partial sums along the {axis}, and a tile "
             "width of {n}; whether either helps is still unknown."),
            ("Perhaps worth measuring for {op}: register accumulators over the {axis}, and {n}-wide tiles.",
             "Still unmeasured for {op}: register accumulators over the {axis}, and {n}-wide tiles.",
             "Must be measured first for {op}: register accumulators over the {axis}, and {n}-wide tiles."),
            ("For {op}, two ideas have perhaps not been tested yet: partial sums kept in registers across the {axis}, "
             "and tiles {n} wide.",
             "For {op}, two ideas have not been tested yet: partial sums kept in registers across the {axis}, and "
             "tiles {n} wide.",
             "For {op}, two ideas have not been tested yet and must come first: partial sums kept in registers across "
             "the {axis}, and tiles {n} wide."),
        ),
    },
}

# Narrative lead-ins of styled text: "<lead-in> <claim, first letter lower-cased>". Neutral on purpose: none adds
# a hedge, a measurement or a verdict, so the claim keeps its category, modality and support.
LEAD_INS: tuple[str, ...] = (
    "One thing to know is that",
    "The main lesson here is that",
    "Before anything else, note that",
    "From this attempt, the takeaway is that",
    "For the record,",
    "Something I would tell the next person is that",
    "It is worth knowing that",
    "Keep in mind that",
    "Going into the next attempt, remember that",
    "Looking back over the submissions,",
)

# Sentences of styled text that are not claims, besides wordings.BOILERPLATE: what a writer says about the notes.
STYLED_BOILERPLATE: tuple[str, ...] = (
    "Quick brain dump before the budget ran out.",
    "Roughly in the order I ran into things.",
    "Nothing here is final.",
    "Sorry for the terse style below.",
    "If anything here disagrees with the code, trust the code.",
    "Grouped loosely, with the most useful parts first.",
    "I kept the wording close to what I jotted down during the attempt.",
    "Skim the headings first.",
)
