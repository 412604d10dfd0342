"""DeepSeek-V3 multi-head latent attention decode, weight-absorbed form (128 heads share one 512-dim latent + 64-dim rope KV per token, contiguous per sequence; softmax scale of the 192-dim qk head with YaRN mscale): one query token per sequence."""
import math

import torch

BATCH = 64
NUM_HEADS = 128
KV_LORA_RANK = 512  # latent dims: the value and the no-rope part of the key
QK_ROPE_HEAD_DIM = 64  # rope dims of the key, shared by all heads
MAX_CONTEXT = 4096  # cache length per sequence; each sequence's length is drawn in [1, MAX_CONTEXT]
# Fixed by the model (not shapes): the softmax scale is that of the un-absorbed 192-dim qk head
# (qk_nope_head_dim 128 + qk_rope_head_dim 64), times the square of YaRN's mscale (factor 40, mscale_all_dim 1).
QK_HEAD_DIM = 192
ROPE_FACTOR = 40.0


@torch.no_grad()
def reference(q: torch.Tensor, kv_cache: torch.Tensor, context_lens: torch.Tensor):
    # q: (batch, heads, kv_lora_rank + rope_dim), the query already multiplied by W_UK (absorbed) and roped;
    # kv_cache: (batch, max_context, kv_lora_rank + rope_dim), one latent vector + rope key per token, shared by
    # every head; context_lens: (batch,) int32 valid tokens per sequence.
    # Returns the latent attention output (batch, heads, kv_lora_rank), still to be multiplied by W_UV.
    batch, heads, dim = q.shape
    max_ctx = kv_cache.shape[1]
    rank = dim - QK_ROPE_HEAD_DIM
    mscale = 0.1 * math.log(ROPE_FACTOR) + 1.0
    scale = mscale * mscale / math.sqrt(QK_HEAD_DIM)
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    kv = kv_cache.to(acc)
    scores = torch.einsum("bhc,btc->bht", q.to(acc), kv) * scale
    pos = torch.arange(max_ctx, device=q.device)
    masked = pos[None, :] >= context_lens.long()[:, None]  # (batch, max_context)
    scores = scores.masked_fill(masked[:, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = torch.einsum("bht,btc->bhc", probs, kv[..., :rank])
    return out.to(q.dtype)


def make_inputs():
    dim = KV_LORA_RANK + QK_ROPE_HEAD_DIM
    q = torch.randn(BATCH, NUM_HEADS, dim, dtype=torch.bfloat16)
    kv_cache = torch.randn(BATCH, MAX_CONTEXT, dim, dtype=torch.bfloat16)
    context_lens = torch.randint(1, MAX_CONTEXT + 1, (BATCH,), dtype=torch.int32)
    return [q, kv_cache, context_lens]
