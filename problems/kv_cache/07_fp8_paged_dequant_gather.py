"""Fp8 paged KV-cache dequantising gather (FlashInfer HND layout, Llama-3.1-8B: 8 KV heads, head_dim 128, block 16, per-token per-head fp32 scales): for each sequence b of a ragged batch and each position p < cu_seqlens[b+1] - cu_seqlens[b], with blk = block_table[b, p // BLOCK_SIZE] and off = p % BLOCK_SIZE, write bfloat16(float32(key_cache[blk, h, off, :]) * k_scales[blk, h, off]) (same for value) into row cu_seqlens[b] + p of contiguous packed (TOTAL_TOKENS, KV_HEADS, HEAD_DIM) K and V; returns (k_packed, v_packed)."""
import torch

BATCH = 32                  # sequences whose fp8 prefixes are gathered for a bf16 prefill kernel
TOTAL_TOKENS = 65536        # packed tokens (cu_seqlens[-1]; 2048 per sequence on average)
KV_HEADS = 8                # Llama-3.1-8B num_key_value_heads
HEAD_DIM = 128              # Llama-3.1-8B head_dim
BLOCK_SIZE = 16             # paged-cache block size
NUM_BLOCKS = 8192           # paged-cache blocks (131072 slots)
MAX_BLOCKS_PER_SEQ = 4096   # block-table width (TOTAL_TOKENS // BLOCK_SIZE: any length up to TOTAL_TOKENS fits)
FP8_MAX = 448.0             # largest finite float8_e4m3fn


@torch.no_grad()
def reference(key_cache, value_cache, k_scales, v_scales, block_table, cu_seqlens):
    # caches: (NUM_BLOCKS, KV_HEADS, BLOCK_SIZE, HEAD_DIM) float8_e4m3fn (HND); scales: (NUM_BLOCKS, KV_HEADS,
    # BLOCK_SIZE) float32; block_table: (BATCH, MAX_BLOCKS_PER_SEQ) int32; cu_seqlens: (BATCH + 1,) int32,
    # non-decreasing from 0 (empty sequences allowed).
    acc = torch.float64 if k_scales.dtype == torch.float64 else torch.float32
    out_dtype = torch.float64 if acc == torch.float64 else torch.bfloat16
    cu = cu_seqlens.long()
    lens = cu[1:] - cu[:-1]
    total = int(cu[-1])
    batch_of = torch.repeat_interleave(torch.arange(lens.numel(), device=cu.device), lens, output_size=total)
    pos = torch.arange(total, device=cu.device) - cu[batch_of]
    bsize = key_cache.shape[2]
    blk = block_table.long()[batch_of, pos // bsize]
    off = pos % bsize
    outs = []
    for cache, scales in ((key_cache, k_scales), (value_cache, v_scales)):
        codes = cache[blk, :, off].to(acc)                    # (total, KV_HEADS, HEAD_DIM)
        scale = scales[blk, :, off].to(acc)                   # (total, KV_HEADS)
        outs.append((codes * scale.unsqueeze(-1)).to(out_dtype))
    return outs[0], outs[1]


def make_inputs():
    cache_shape = (NUM_BLOCKS, KV_HEADS, BLOCK_SIZE, HEAD_DIM)
    # Codes as a per-token absmax quantiser leaves them (spread over the whole e4m3 range, some subnormal).
    key_cache = (110.0 * torch.randn(cache_shape)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    value_cache = (110.0 * torch.randn(cache_shape)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    # Per-token per-head scales over two orders of magnitude (outlier heads and tokens).
    k_scales = 0.004 * torch.exp(torch.randn(NUM_BLOCKS, KV_HEADS, BLOCK_SIZE))
    v_scales = 0.004 * torch.exp(torch.randn(NUM_BLOCKS, KV_HEADS, BLOCK_SIZE))
    # Blocks may be shared between sequences (prefix caching); unused table entries point at arbitrary blocks.
    block_table = torch.randint(0, NUM_BLOCKS, (BATCH, MAX_BLOCKS_PER_SEQ), dtype=torch.int32)
    # Ragged lengths: half the tokens spread evenly, half cut at random points; lengths need not be multiples of
    # BLOCK_SIZE and sum to TOTAL_TOKENS.
    even = TOTAL_TOKENS // (2 * BATCH)
    rest = TOTAL_TOKENS - even * BATCH
    cuts = torch.randint(0, rest + 1, (BATCH - 1,)).sort().values
    offsets = torch.cat((torch.zeros(1, dtype=torch.long), cuts, torch.full((1,), rest, dtype=torch.long)))
    cu_seqlens = (torch.arange(BATCH + 1) * even + offsets).to(torch.int32)
    return [key_cache, value_cache, k_scales, v_scales, block_table, cu_seqlens]
