"""MoE align-block-size (vLLM moe_align_block_size, Mixtral-8x7B: 8 experts, top-2, block 64): from topk_ids, count each expert's assignments, pad every expert's count up to a multiple of BLOCK_SIZE (exclusive prefix sum of the padded counts gives each expert's start), and scatter the flat assignment indices t * TOPK + k into sorted_token_ids grouped by expert (ascending index within an expert, padding = TOKENS * TOPK); returns (sorted_token_ids int32 (MAX_PADDED,), expert_ids int32 (MAX_BLOCKS,) = the expert of each block or -1 past the last, blocks_per_expert int32 (EXPERTS,)) with MAX_PADDED = TOKENS * TOPK + EXPERTS * (BLOCK_SIZE - 1) and MAX_BLOCKS = ceil(MAX_PADDED / BLOCK_SIZE)."""
import torch

TOKENS = 4096      # tokens routed in one step (a 4096-token prefill batch)
TOPK = 2           # Mixtral-8x7B num_experts_per_tok
EXPERTS = 8        # Mixtral-8x7B num_local_experts
BLOCK_SIZE = 64    # the fused-MoE GEMM's BLOCK_SIZE_M; solve uses 64 (not inferable from the inputs)


@torch.no_grad()
def reference(topk_ids):
    # topk_ids: (TOKENS, TOPK) int32, values in [0, EXPERTS), distinct within a token.
    device = topk_ids.device
    flat = topk_ids.flatten().long()
    numel = flat.numel()
    max_padded = numel + EXPERTS * (BLOCK_SIZE - 1)
    max_blocks = (max_padded + BLOCK_SIZE - 1) // BLOCK_SIZE
    counts = torch.bincount(flat, minlength=EXPERTS)
    blocks = (counts + BLOCK_SIZE - 1) // BLOCK_SIZE
    block_start = torch.cumsum(blocks, 0) - blocks                    # exclusive prefix sum
    count_start = torch.cumsum(counts, 0) - counts
    order = torch.argsort(flat, stable=True)                          # assignments grouped by expert, stable
    expert_of = flat[order]
    rank = torch.arange(numel, device=device) - count_start[expert_of]
    sorted_token_ids = torch.full((max_padded,), numel, dtype=torch.int32, device=device)
    sorted_token_ids[block_start[expert_of] * BLOCK_SIZE + rank] = order.to(torch.int32)
    expert_ids = torch.full((max_blocks,), -1, dtype=torch.int32, device=device)
    used = int(blocks.sum())
    expert_ids[:used] = torch.repeat_interleave(torch.arange(EXPERTS, device=device), blocks).to(torch.int32)
    return sorted_token_ids, expert_ids, blocks.to(torch.int32)


def make_inputs():
    # Skewed expert popularity (redrawn per seed), TOPK distinct experts per token.
    popularity = torch.softmax(0.7 * torch.randn(EXPERTS), dim=0)
    topk_ids = torch.multinomial(popularity.expand(TOKENS, EXPERTS), TOPK, replacement=False)
    return [topk_ids.to(torch.int32)]
