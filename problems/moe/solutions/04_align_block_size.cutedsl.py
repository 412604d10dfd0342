"""GPU (sm_90a) CuTe DSL solution: one CTA of 256 threads. Thread k owns a contiguous chunk of ceil(N / 256) flat
assignments: it fills its stripe of the padded index list with N and counts its chunk's experts into its row of
a shared (256, EXPERTS) table; threads e < EXPERTS turn column e into an exclusive prefix over the chunks (each
chunk's first rank inside expert e) and its total; thread 0 pads the totals to BLOCK_SIZE and prefix-sums them
into block starts; then every thread scatters its chunk in order (ranks stay ascending) and writes its stripe of
the block table (the expert whose block range holds the block, -1 past the last) and the block counts."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

BLOCK_SIZE = 64    # the problem's BLOCK_SIZE and EXPERTS (Mixtral-8x7B): they set the output sizes and are not
EXPERTS = 8        # inferable from the ids
THREADS = 256
_compiled = {}


@cute.kernel
def _align_kernel(mF: cute.Tensor, mS: cute.Tensor, mEX: cute.Tensor, mBPE: cute.Tensor, numel: cutlass.Constexpr,
                  experts: cutlass.Constexpr, chunk: cutlass.Constexpr, max_padded: cutlass.Constexpr,
                  max_blocks: cutlass.Constexpr):
    tx, _, _ = cute.arch.thread_idx()
    bs = BLOCK_SIZE
    smem = cutlass.memory.SmemAllocator()
    cnt = smem.allocate_tensor(cutlass.Int32, cute.make_layout(THREADS * experts))
    tot = smem.allocate_tensor(cutlass.Int32, cute.make_layout(experts))
    bstart = smem.allocate_tensor(cutlass.Int32, cute.make_layout(experts + 1))
    run = cute.make_rmem_tensor((1,), cutlass.Int32)
    for j in range((max_padded + THREADS - 1) // THREADS):
        p = j * THREADS + tx
        if p < max_padded:
            mS[p] = cutlass.Int32(numel)
    for e in cutlass.range_constexpr(experts):
        cnt[tx * experts + e] = cutlass.Int32(0)
    for i in range(chunk):
        idx = tx * chunk + i
        if idx < numel:
            slot = tx * experts + mF[idx]
            cnt[slot] = cnt[slot] + 1
    cute.arch.sync_threads()
    if tx < experts:
        run[0] = cutlass.Int32(0)
        for k in range(THREADS):
            v = cnt[k * experts + tx]
            cnt[k * experts + tx] = run[0]
            run[0] = run[0] + v
        tot[tx] = run[0]
    cute.arch.sync_threads()
    if tx == 0:
        bstart[0] = cutlass.Int32(0)
        for e in cutlass.range_constexpr(experts):
            bstart[e + 1] = bstart[e] + (tot[e] + (bs - 1)) // bs
    cute.arch.sync_threads()
    for i in range(chunk):
        idx = tx * chunk + i
        if idx < numel:
            e = mF[idx]
            slot = tx * experts + e
            mS[bstart[e] * bs + cnt[slot]] = cutlass.Int32(idx)
            cnt[slot] = cnt[slot] + 1
    for j in range((max_blocks + THREADS - 1) // THREADS):
        b = j * THREADS + tx
        if b < max_blocks:
            run[0] = cutlass.Int32(-1)
            if b < bstart[experts]:
                run[0] = cutlass.Int32(0)
                for e in cutlass.range_constexpr(experts - 1):
                    if bstart[e + 1] <= b:
                        run[0] = run[0] + 1
            mEX[b] = run[0]
    if tx < experts:
        mBPE[tx] = bstart[tx + 1] - bstart[tx]


@cute.jit
def _align(mF: cute.Tensor, mS: cute.Tensor, mEX: cute.Tensor, mBPE: cute.Tensor, numel: cutlass.Constexpr,
           experts: cutlass.Constexpr, chunk: cutlass.Constexpr, max_padded: cutlass.Constexpr,
           max_blocks: cutlass.Constexpr):
    _align_kernel(mF, mS, mEX, mBPE, numel, experts, chunk, max_padded, max_blocks).launch(
        grid=(1, 1, 1), block=(THREADS, 1, 1))


def solve(topk_ids):
    if topk_ids.dtype != torch.int32 or topk_ids.dim() != 2 or not topk_ids.is_contiguous():
        raise ValueError("topk_ids must be a contiguous int32 (TOKENS, TOPK) tensor")
    numel = topk_ids.numel()
    experts = EXPERTS
    max_padded = numel + experts * (BLOCK_SIZE - 1)
    max_blocks = (max_padded + BLOCK_SIZE - 1) // BLOCK_SIZE
    dev = topk_ids.device
    sorted_token_ids = torch.empty(max_padded, dtype=torch.int32, device=dev)
    expert_ids = torch.empty(max_blocks, dtype=torch.int32, device=dev)
    blocks_per_expert = torch.empty(experts, dtype=torch.int32, device=dev)
    args = [from_dlpack(x) for x in (topk_ids.view(-1), sorted_token_ids, expert_ids, blocks_per_expert)]
    key = (numel, experts)
    if key not in _compiled:
        _compiled[key] = cute.compile(_align, *args, numel, experts, (numel + THREADS - 1) // THREADS, max_padded,
                                      max_blocks)
    _compiled[key](*args)
    return sorted_token_ids, expert_ids, blocks_per_expert
