"""CPU-target (LLVM) TIRx solution, the GPU kernel's algorithm run serially over its THREADS chunks: chunk k (a
contiguous run of ceil(N / THREADS) flat assignments) counts its experts; an exclusive prefix over the chunks per
expert gives each chunk its first rank inside every expert, and the per-expert totals, padded to BLOCK_SIZE,
give the block starts; each chunk then scatters its indices in order (so ranks stay ascending), after the padded
index list was filled with N; the block table and block counts are read off the block starts."""
import torch
import tvm
from tvm.script import tirx as T

BLOCK_SIZE = 64    # the problem's BLOCK_SIZE and EXPERTS (Mixtral-8x7B): they set the output sizes and are not
EXPERTS = 8        # inferable from the ids
THREADS = 256      # the GPU kernel's CTA size: the number of chunks
_compiled = {}


def _build(numel, experts):
    bs = BLOCK_SIZE
    max_padded = numel + experts * (bs - 1)
    max_blocks = (max_padded + bs - 1) // bs
    chunk = (numel + THREADS - 1) // THREADS

    @T.prim_func
    def align(f_ptr: T.handle, s_ptr: T.handle, e_ptr: T.handle, b_ptr: T.handle):
        F = T.match_buffer(f_ptr, (numel,), "int32")
        S = T.match_buffer(s_ptr, (max_padded,), "int32")
        EX = T.match_buffer(e_ptr, (max_blocks,), "int32")
        BPE = T.match_buffer(b_ptr, (experts,), "int32")
        cnt = T.alloc_buffer((THREADS * experts,), "int32")
        tot = T.alloc_buffer((experts,), "int32")
        bstart = T.alloc_buffer((experts + 1,), "int32")
        run = T.alloc_buffer((1,), "int32")
        for p in T.serial(max_padded):
            S[p] = numel
        for k in T.serial(THREADS):
            for e in T.serial(experts):
                cnt[k * experts + e] = 0
            for i in T.serial(chunk):
                if k * chunk + i < numel:
                    cnt[k * experts + F[k * chunk + i]] = cnt[k * experts + F[k * chunk + i]] + 1
        for e in T.serial(experts):
            run[0] = 0
            for k in T.serial(THREADS):
                v = cnt[k * experts + e]
                cnt[k * experts + e] = run[0]
                run[0] = run[0] + v
            tot[e] = run[0]
        bstart[0] = 0
        for e in T.serial(experts):
            bstart[e + 1] = bstart[e] + (tot[e] + bs - 1) // bs
        for k in T.serial(THREADS):
            for i in T.serial(chunk):
                if k * chunk + i < numel:
                    e = F[k * chunk + i]
                    S[bstart[e] * bs + cnt[k * experts + e]] = k * chunk + i
                    cnt[k * experts + e] = cnt[k * experts + e] + 1
        for b in T.serial(max_blocks):
            if b >= bstart[experts]:
                EX[b] = -1
            else:
                run[0] = 0
                for e in T.serial(experts - 1):
                    if bstart[e + 1] <= b:
                        run[0] = run[0] + 1
                EX[b] = run[0]
        for e in T.serial(experts):
            BPE[e] = bstart[e + 1] - bstart[e]

    return tvm.compile(tvm.IRModule({"main": align}), target="llvm", tir_pipeline="tirx")["main"]


def solve(topk_ids):
    if topk_ids.dtype != torch.int32 or topk_ids.dim() != 2 or not topk_ids.is_contiguous():
        raise ValueError("topk_ids must be a contiguous int32 (TOKENS, TOPK) tensor")
    numel = topk_ids.numel()
    experts = EXPERTS
    max_padded = numel + experts * (BLOCK_SIZE - 1)
    max_blocks = (max_padded + BLOCK_SIZE - 1) // BLOCK_SIZE
    key = (numel, experts)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    sorted_token_ids = torch.empty(max_padded, dtype=torch.int32)
    expert_ids = torch.empty(max_blocks, dtype=torch.int32)
    blocks_per_expert = torch.empty(experts, dtype=torch.int32)
    _compiled[key](topk_ids.view(-1), sorted_token_ids, expert_ids, blocks_per_expert)
    return sorted_token_ids, expert_ids, blocks_per_expert
