"""DeepSeek-V3 MLA latent KV-cache write (vLLM kv_a_layernorm + rotary_emb + concat_and_cache_mla), in place: per token, RMSNorm the compressed latent kv_c (KV_LORA_RANK = 512; fp32, x * rsqrt(mean(x^2) + 1e-6) * weight, one bf16 rounding), rotate the ROPE_DIM = 64 decoupled key dims k_pe GPT-J style (interleaved pairs (x[2i], x[2i+1]) by cos/sin_cache[positions][i], fp32 math), and write [normed latent | rotated k_pe] into the bf16 paged MLA cache row at slot_mapping; returns None."""
import torch

TOKENS = 4096          # tokens in one step (a 4096-token prefill chunk)
KV_LORA_RANK = 512     # DeepSeek-V3 kv_lora_rank
ROPE_DIM = 64          # DeepSeek-V3 qk_rope_head_dim
BLOCK_SIZE = 64        # FlashMLA KV-cache block size
NUM_BLOCKS = 1024      # paged-cache blocks (65536 slots)
MAX_POS = 163840       # DeepSeek-V3 max_position_embeddings
ROPE_THETA = 10000.0   # DeepSeek-V3 rope_theta (YaRN would only change the cos/sin table, an input here)
EPS = 1e-6             # DeepSeek-V3 rms_norm_eps


@torch.no_grad()
def reference(kv_c, k_pe, norm_weight, positions, cos_sin_cache, kv_cache, slot_mapping):
    # kv_c: (TOKENS, KV_LORA_RANK) bf16; k_pe: (TOKENS, ROPE_DIM) bf16; norm_weight: (KV_LORA_RANK,) bf16;
    # positions: (TOKENS,) int64; cos_sin_cache: (MAX_POS, ROPE_DIM) float32 = [cos | sin];
    # kv_cache: (NUM_BLOCKS, BLOCK_SIZE, KV_LORA_RANK + ROPE_DIM) bf16; slot_mapping: (TOKENS,) int64, distinct.
    acc = torch.float64 if kv_c.dtype == torch.float64 else torch.float32
    x = kv_c.to(acc)
    rstd = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)
    latent = x * rstd * norm_weight.to(acc)
    half = k_pe.shape[-1] // 2
    cs = cos_sin_cache[positions].to(acc)
    cos, sin = cs[:, :half], cs[:, half:]
    x1, x2 = k_pe[:, 0::2].to(acc), k_pe[:, 1::2].to(acc)
    rotated = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
    kv_cache.view(-1, kv_cache.shape[-1])[slot_mapping] = torch.cat((latent, rotated), dim=-1).to(kv_cache.dtype)


def make_inputs():
    kv_c = torch.randn(TOKENS, KV_LORA_RANK, dtype=torch.bfloat16)
    k_pe = torch.randn(TOKENS, ROPE_DIM, dtype=torch.bfloat16)
    norm_weight = (1.0 + 0.2 * torch.randn(KV_LORA_RANK)).to(torch.bfloat16)
    positions = torch.randint(0, MAX_POS, (TOKENS,))
    inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, ROPE_DIM, 2, dtype=torch.float64) / ROPE_DIM))
    freqs = torch.outer(torch.arange(MAX_POS, dtype=torch.float64), inv_freq)
    cos_sin_cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(torch.float32)
    # Earlier cache contents (must survive untouched outside the written slots).
    kv_cache = torch.randn(NUM_BLOCKS, BLOCK_SIZE, KV_LORA_RANK + ROPE_DIM, dtype=torch.bfloat16)
    slot_mapping = torch.randperm(NUM_BLOCKS * BLOCK_SIZE)[:TOKENS]
    return [kv_c, k_pe, norm_weight, positions, cos_sin_cache, kv_cache, slot_mapping]
