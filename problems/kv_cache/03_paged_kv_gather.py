"""Paged KV-cache gather for prefix-cache reuse (vLLM gather_cache, Llama-3.1-70B: 8 KV heads, head_dim 128, block 16): for each sequence b of a ragged batch and each position p < cu_seqlens[b+1] - cu_seqlens[b], copy key_cache / value_cache[block_table[b, p // BLOCK_SIZE], p % BLOCK_SIZE] into row cu_seqlens[b] + p of contiguous packed (TOTAL_TOKENS, KV_HEADS, HEAD_DIM) K and V buffers; returns (k_packed, v_packed)."""
import torch

BATCH = 32                  # sequences whose cached prefixes are gathered
TOTAL_TOKENS = 32768        # packed tokens over the batch (cu_seqlens[-1]; 1024 per sequence on average)
KV_HEADS = 8                # Llama-3.1-70B num_key_value_heads
HEAD_DIM = 128              # Llama-3.1-70B head_dim
BLOCK_SIZE = 16             # vLLM default KV-cache block size
NUM_BLOCKS = 4096           # paged-cache blocks (65536 slots)
MAX_BLOCKS_PER_SEQ = 2048   # block-table width (TOTAL_TOKENS // BLOCK_SIZE: any length up to TOTAL_TOKENS fits)


@torch.no_grad()
def reference(key_cache, value_cache, block_table, cu_seqlens):
    # caches: (NUM_BLOCKS, BLOCK_SIZE, KV_HEADS, HEAD_DIM); block_table: (BATCH, MAX_BLOCKS_PER_SEQ) int32;
    # cu_seqlens: (BATCH + 1,) int32, non-decreasing, cu_seqlens[0] = 0 (empty sequences allowed).
    cu = cu_seqlens.long()
    lens = cu[1:] - cu[:-1]
    total = int(cu[-1])
    batch_of = torch.repeat_interleave(torch.arange(lens.numel(), device=cu.device), lens, output_size=total)
    pos = torch.arange(total, device=cu.device) - cu[batch_of]
    bsize, heads, dim = key_cache.shape[1], key_cache.shape[2], key_cache.shape[3]
    slots = block_table.long()[batch_of, pos // bsize] * bsize + pos % bsize
    k_packed = key_cache.reshape(-1, heads, dim)[slots]
    v_packed = value_cache.reshape(-1, heads, dim)[slots]
    return k_packed, v_packed


def make_inputs():
    cache_shape = (NUM_BLOCKS, BLOCK_SIZE, KV_HEADS, HEAD_DIM)
    key_cache = torch.randn(cache_shape, dtype=torch.bfloat16)
    value_cache = torch.randn(cache_shape, dtype=torch.bfloat16)
    # Blocks may be shared between sequences (prefix caching); unused table entries point at arbitrary blocks.
    block_table = torch.randint(0, NUM_BLOCKS, (BATCH, MAX_BLOCKS_PER_SEQ), dtype=torch.int32)
    # Ragged lengths: half the tokens spread evenly, the other half cut at random points (lengths need not be
    # multiples of BLOCK_SIZE; some may be well over the mean), summing to TOTAL_TOKENS.
    even = TOTAL_TOKENS // (2 * BATCH)
    rest = TOTAL_TOKENS - even * BATCH
    cuts = torch.randint(0, rest + 1, (BATCH - 1,)).sort().values
    offsets = torch.cat((torch.zeros(1, dtype=torch.long), cuts, torch.full((1,), rest, dtype=torch.long)))
    cu_seqlens = (torch.arange(BATCH + 1) * even + offsets).to(torch.int32)
    return [key_cache, value_cache, block_table, cu_seqlens]
