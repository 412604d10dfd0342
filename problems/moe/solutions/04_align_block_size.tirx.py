"""GPU (sm_90a) TIRx solution: one CTA of 256 threads. Thread k owns a contiguous chunk of ceil(N / 256) flat
assignments: it fills its stripe of the padded index list with N and counts its chunk's experts into its row of
a shared (256, EXPERTS) table; threads e < EXPERTS turn column e into an exclusive prefix over the chunks (each
chunk's first rank inside expert e) and its total; thread 0 pads the totals to BLOCK_SIZE and prefix-sums them
into block starts; then every thread scatters its chunk in order (ranks stay ascending) and writes its stripe of
the block table (the expert whose block range holds the block, -1 past the last) and the block counts."""
import torch
import tvm
from tvm.script import tirx as T

BLOCK_SIZE = 64    # the problem's BLOCK_SIZE and EXPERTS (Mixtral-8x7B): they set the output sizes and are not
EXPERTS = 8        # inferable from the ids
THREADS = 256
_compiled = {}
_TARGET = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})


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
        T.device_entry()
        _ = T.cta_id([1])
        tx = T.thread_id([THREADS])
        cnt = T.alloc_shared((THREADS * experts,), "int32")
        tot = T.alloc_shared((experts,), "int32")
        bstart = T.alloc_shared((experts + 1,), "int32")
        run = T.alloc_local((1,), "int32")
        for j in T.serial((max_padded + THREADS - 1) // THREADS):
            if j * THREADS + tx < max_padded:
                S[j * THREADS + tx] = numel
        for e in T.unroll(experts):
            cnt[tx * experts + e] = 0
        for i in T.serial(chunk):
            if tx * chunk + i < numel:
                cnt[tx * experts + F[tx * chunk + i]] = cnt[tx * experts + F[tx * chunk + i]] + 1
        T.cuda.cta_sync()
        if tx < experts:
            run[0] = 0
            for k in T.serial(THREADS):
                v = cnt[k * experts + tx]
                cnt[k * experts + tx] = run[0]
                run[0] = run[0] + v
            tot[tx] = run[0]
        T.cuda.cta_sync()
        if tx == 0:
            bstart[0] = 0
            for e in T.serial(experts):
                bstart[e + 1] = bstart[e] + (tot[e] + bs - 1) // bs
        T.cuda.cta_sync()
        for i in T.serial(chunk):
            if tx * chunk + i < numel:
                e = F[tx * chunk + i]
                S[bstart[e] * bs + cnt[tx * experts + e]] = tx * chunk + i
                cnt[tx * experts + e] = cnt[tx * experts + e] + 1
        for j in T.serial((max_blocks + THREADS - 1) // THREADS):
            b = j * THREADS + tx
            if b < max_blocks:
                if b >= bstart[experts]:
                    EX[b] = -1
                else:
                    run[0] = 0
                    for e in T.unroll(experts - 1):
                        if bstart[e + 1] <= b:
                            run[0] = run[0] + 1
                    EX[b] = run[0]
        if tx < experts:
            BPE[tx] = bstart[tx + 1] - bstart[tx]

    return tvm.compile(tvm.IRModule({"main": align}), target=_TARGET, tir_pipeline="tirx")["main"]


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
    dev = topk_ids.device
    sorted_token_ids = torch.empty(max_padded, dtype=torch.int32, device=dev)
    expert_ids = torch.empty(max_blocks, dtype=torch.int32, device=dev)
    blocks_per_expert = torch.empty(experts, dtype=torch.int32, device=dev)
    _compiled[key](topk_ids.view(-1), sorted_token_ids, expert_ids, blocks_per_expert)
    return sorted_token_ids, expert_ids, blocks_per_expert
