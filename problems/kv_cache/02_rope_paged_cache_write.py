"""Fused neox-style rotary embedding + paged KV-cache write (vLLM rotary_embedding + reshape_and_cache_flash, Llama-3-8B chunked prefill), in place: rotate query and key per token by cos/sin_cache[positions] (x1*cos - x2*sin, x2*cos + x1*sin on the two halves of each head, fp32 math, bf16 result), then write the rotated key and the value into the bf16 caches at slot_mapping; returns None."""
import torch

TOKENS = 2048        # tokens in one step (a 2048-token prefill chunk)
NUM_HEADS = 32       # Llama-3-8B num_attention_heads
KV_HEADS = 8         # Llama-3-8B num_key_value_heads
HEAD_DIM = 128       # Llama-3-8B head_dim (rotary_dim = head_dim)
BLOCK_SIZE = 16      # vLLM default KV-cache block size
NUM_BLOCKS = 1024    # paged-cache blocks (16384 slots)
MAX_POS = 8192       # Llama-3-8B max_position_embeddings
ROPE_THETA = 500000.0


@torch.no_grad()
def reference(positions, query, key, value, cos_sin_cache, key_cache, value_cache, slot_mapping):
    # positions: (TOKENS,) int64; query: (TOKENS, NUM_HEADS, HEAD_DIM); key/value: (TOKENS, KV_HEADS, HEAD_DIM);
    # cos_sin_cache: (MAX_POS, HEAD_DIM) float32 = [cos | sin]; caches: (NUM_BLOCKS, BLOCK_SIZE, KV_HEADS, HEAD_DIM);
    # slot_mapping: (TOKENS,) int64, distinct slots.
    acc = torch.float64 if query.dtype == torch.float64 else torch.float32
    half = query.shape[-1] // 2
    cs = cos_sin_cache[positions].to(acc)
    cos, sin = cs[:, None, :half], cs[:, None, half:]
    for x in (query, key):
        xf = x.to(acc)
        x1, x2 = xf[..., :half], xf[..., half:]
        x.copy_(torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype))
    heads, dim = key.shape[1], key.shape[2]
    key_cache.view(-1, heads, dim)[slot_mapping] = key.to(key_cache.dtype)
    value_cache.view(-1, heads, dim)[slot_mapping] = value.to(value_cache.dtype)


def make_inputs():
    positions = torch.randint(0, MAX_POS, (TOKENS,))
    query = torch.randn(TOKENS, NUM_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    key = torch.randn(TOKENS, KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    value = torch.randn(TOKENS, KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float64) / HEAD_DIM))
    freqs = torch.outer(torch.arange(MAX_POS, dtype=torch.float64), inv_freq)
    cos_sin_cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(torch.float32)
    cache_shape = (NUM_BLOCKS, BLOCK_SIZE, KV_HEADS, HEAD_DIM)
    # Earlier cache contents (must survive untouched outside the written slots).
    key_cache = torch.randn(cache_shape, dtype=torch.bfloat16)
    value_cache = torch.randn(cache_shape, dtype=torch.bfloat16)
    slot_mapping = torch.randperm(NUM_BLOCKS * BLOCK_SIZE)[:TOKENS]
    return [positions, query, key, value, cos_sin_cache, key_cache, value_cache, slot_mapping]
