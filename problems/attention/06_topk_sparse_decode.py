"""DeepSeek-V3.2 sparse attention decode (DSA, weight-absorbed MLA: 128 heads over one shared 512 + 64-dim latent KV per token): each query attends only to its index_topk = 2048 selected tokens, gathered by int32 indices (-1 = unused slot) from a flat token pool; returns the latent output and the log-sum-exp."""
import math

import torch

BATCH = 64
NUM_HEADS = 128
KV_LORA_RANK = 512  # latent dims: the value and the no-rope part of the key
QK_ROPE_HEAD_DIM = 64  # rope dims of the key, shared by all heads
TOPK = 2048  # index_topk: tokens the lightning indexer selects per query
MAX_CONTEXT = 8192  # pool tokens per sequence; each sequence's length is drawn in [TOPK / 2, MAX_CONTEXT]
# Fixed by the model (not shapes): the softmax scale is that of the un-absorbed 192-dim qk head
# (qk_nope_head_dim 128 + qk_rope_head_dim 64), times the square of YaRN's mscale (factor 40, mscale_all_dim 1).
QK_HEAD_DIM = 192
ROPE_FACTOR = 40.0


@torch.no_grad()
def reference(q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor):
    # q: (batch, heads, kv_lora_rank + rope_dim), absorbed and roped; kv_cache: (pool_tokens, kv_lora_rank +
    # rope_dim), one latent + rope key per token, shared by every head; indices: (batch, topk) int32 pool rows the
    # query attends to (shared by its heads), -1 where unused (every row has at least one valid index).
    # Returns the latent output (batch, heads, kv_lora_rank) and the log-sum-exp of the scaled scores (batch, heads).
    dim = q.shape[-1]
    rank = dim - QK_ROPE_HEAD_DIM
    mscale = 0.1 * math.log(ROPE_FACTOR) + 1.0
    scale = mscale * mscale / math.sqrt(QK_HEAD_DIM)
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    idx = indices.long()
    valid = idx >= 0
    kv = kv_cache[idx.clamp(min=0)].to(acc)  # (batch, topk, dim)
    scores = torch.einsum("bhc,bkc->bhk", q.to(acc), kv) * scale
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - lse[..., None])
    out = torch.einsum("bhk,bkc->bhc", probs, kv[..., :rank])
    return out.to(q.dtype), lse


def make_inputs():
    dim = KV_LORA_RANK + QK_ROPE_HEAD_DIM
    q = torch.randn(BATCH, NUM_HEADS, dim, dtype=torch.bfloat16)
    kv_cache = torch.randn(BATCH * MAX_CONTEXT, dim, dtype=torch.bfloat16)
    # Sequence b owns pool rows b * MAX_CONTEXT .. b * MAX_CONTEXT + len_b - 1 and selects min(len_b, TOPK) distinct
    # ones of them in random order; the rest of its row is -1, scattered among the valid slots. Sequence 0 is always
    # shorter than TOPK, so unused slots occur in every draw.
    lens = torch.randint(TOPK // 2, MAX_CONTEXT + 1, (BATCH,))
    lens[0] = torch.randint(TOPK // 2, TOPK, (1,))
    indices = torch.full((BATCH, TOPK), -1, dtype=torch.int32)
    for b in range(BATCH):
        n = int(lens[b])
        chosen = torch.randperm(n)[:min(n, TOPK)] + b * MAX_CONTEXT
        slots = torch.randperm(TOPK)[:chosen.numel()]
        indices[b, slots] = chosen.to(torch.int32)
    return [q, kv_cache, indices]
