"""Dynamic fp8 KV-cache append (vLLM reshape_and_cache_flash style, Llama-3-8B chunked prefill), in place: for key and value, per token and KV head scale = max(amax|x|, 1e-6) / 448 in fp32, cache[slot_mapping[t]] = float8_e4m3fn(clamp(x / scale, -448, 448)) (round to nearest even), scales[slot_mapping[t]] = scale; returns None."""
import torch

TOKENS = 2048       # tokens appended in one step (a 2048-token prefill chunk)
KV_HEADS = 8        # Llama-3-8B num_key_value_heads
HEAD_DIM = 128      # Llama-3-8B head_dim
BLOCK_SIZE = 16     # vLLM default KV-cache block size
NUM_BLOCKS = 1024   # paged-cache blocks (16384 slots)
FP8_MAX = 448.0     # largest finite float8_e4m3fn
SCALE_MIN = 1e-6    # floor on amax so an all-zero head gets a finite scale


@torch.no_grad()
def reference(key, value, key_cache, value_cache, slot_mapping, k_scales, v_scales):
    # key/value: (TOKENS, KV_HEADS, HEAD_DIM); caches: (NUM_BLOCKS, BLOCK_SIZE, KV_HEADS, HEAD_DIM) float8_e4m3fn;
    # scales: (NUM_BLOCKS, BLOCK_SIZE, KV_HEADS) float32; slot_mapping: (TOKENS,) int64, distinct slots.
    acc = torch.float64 if key.dtype == torch.float64 else torch.float32
    for x, cache, scales in ((key, key_cache, k_scales), (value, value_cache, v_scales)):
        heads, dim = x.shape[1], x.shape[2]
        xf = x.to(acc)
        scale = xf.abs().amax(dim=-1).clamp(min=SCALE_MIN) / FP8_MAX
        q = (xf / scale.unsqueeze(-1)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        if cache.dtype == torch.float8_e4m3fn:   # store the raw bytes (uint8 index_put works on every device)
            cache.view(torch.uint8).view(-1, heads, dim)[slot_mapping] = q.view(torch.uint8)
        else:                                    # float64 anchor
            cache.view(-1, heads, dim)[slot_mapping] = q.to(cache.dtype)
        scales.view(-1, heads)[slot_mapping] = scale.to(scales.dtype)


def make_inputs():
    key = torch.randn(TOKENS, KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    value = torch.randn(TOKENS, KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    cache_shape = (NUM_BLOCKS, BLOCK_SIZE, KV_HEADS, HEAD_DIM)
    # Earlier cache contents (must survive untouched outside the appended slots).
    key_cache = (64.0 * torch.randn(cache_shape)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    value_cache = (64.0 * torch.randn(cache_shape)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    slot_mapping = torch.randperm(NUM_BLOCKS * BLOCK_SIZE)[:TOKENS]
    k_scales = 0.002 + 0.01 * torch.rand(NUM_BLOCKS, BLOCK_SIZE, KV_HEADS)
    v_scales = 0.002 + 0.01 * torch.rand(NUM_BLOCKS, BLOCK_SIZE, KV_HEADS)
    return [key, value, key_cache, value_cache, slot_mapping, k_scales, v_scales]
