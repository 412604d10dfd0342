"""Decode attention with rotary embedding fused in (Qwen2.5-7B: 28 query / 4 KV heads, head_dim 128, neox-style RoPE, rope_theta 1e6), in place: rotate the new query and key by the token's position (x1*cos - x2*sin, x2*cos + x1*sin on the two halves, fp32 math, bf16 result), append the rotated key and the value to the contiguous bf16 caches, whose earlier keys are stored already rotated, then attend over the cache up to and including the new token."""
import math

import torch

BATCH = 32
NUM_Q_HEADS = 28
NUM_KV_HEADS = 4
HEAD_DIM = 128
MAX_CONTEXT = 16384  # cache capacity per sequence; each sequence holds [0, MAX_CONTEXT - 1] earlier tokens
ROPE_THETA = 1000000.0


@torch.no_grad()
def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
              cache_lens: torch.Tensor, cos_sin_cache: torch.Tensor):
    # q: (batch, q_heads, d) and k, v: (batch, kv_heads, d), the new token, not rotated; k_cache, v_cache:
    # (batch, max_context, kv_heads, d), earlier keys already rotated; cache_lens: (batch,) int32 tokens already
    # cached, which is also the new token's position; cos_sin_cache: (max_context, d) float32 = [cos | sin].
    # Writes the rotated key and the value at [b, cache_lens[b]]; returns the attention output (batch, q_heads, d)
    # over keys 0 .. cache_lens[b], scores scaled by 1/sqrt(d).
    batch, q_heads, d = q.shape
    max_tokens, kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = q_heads // kv_heads
    half = d // 2
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    pos = cache_lens.long()
    cs = cos_sin_cache[pos].to(acc)  # (batch, d)
    cos, sin = cs[:, None, :half], cs[:, None, half:]

    def rope(x):
        xf = x.to(acc)
        x1, x2 = xf[..., :half], xf[..., half:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)

    q_rot = rope(q).to(q.dtype)
    rows = torch.arange(batch, device=q.device)
    k_cache[rows, pos] = rope(k).to(k_cache.dtype)
    v_cache[rows, pos] = v.to(v_cache.dtype)
    qg = q_rot.to(acc).reshape(batch, kv_heads, group, d)
    scores = torch.einsum("bhgd,bthd->bhgt", qg, k_cache.to(acc)) * (1.0 / math.sqrt(d))
    t = torch.arange(max_tokens, device=q.device)
    masked = t[None, :] > pos[:, None]  # (batch, max_tokens)
    scores = scores.masked_fill(masked[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = torch.einsum("bhgt,bthd->bhgd", probs, v_cache.to(acc))
    return out.reshape(batch, q_heads, d).to(q.dtype)


def make_inputs():
    q = torch.randn(BATCH, NUM_Q_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    k = torch.randn(BATCH, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    v = torch.randn(BATCH, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    # earlier (rotated) keys and values; the slots past each sequence's length hold stale data that must stay
    # masked and, but for the appended slot, untouched
    k_cache = torch.randn(BATCH, MAX_CONTEXT, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    v_cache = torch.randn(BATCH, MAX_CONTEXT, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    cache_lens = torch.randint(0, MAX_CONTEXT, (BATCH,), dtype=torch.int32)
    inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float64) / HEAD_DIM))
    freqs = torch.outer(torch.arange(MAX_CONTEXT, dtype=torch.float64), inv_freq)
    cos_sin_cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(torch.float32)
    return [q, k, v, k_cache, v_cache, cache_lens, cos_sin_cache]
