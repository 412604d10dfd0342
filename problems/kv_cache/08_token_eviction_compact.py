"""In-place KV-cache compaction after SnapKV / H2O token eviction (Mistral-7B-Instruct-v0.2: 8 KV heads, head_dim 128, 16k-token prompts, budget 2048): for every sequence b and KV head h, keep_idx[b, h] lists KEEP distinct cache positions in ascending order (a different selection per head, the last WINDOW positions always among them); key_cache[b, h, j] = old key_cache[b, h, keep_idx[b, h, j]] for j < KEEP (same for value_cache), positions >= KEEP left as they were; returns None."""
import torch

BATCH = 8          # sequences whose prompts are compressed after prefill
KV_HEADS = 8       # Mistral-7B num_key_value_heads
SEQ = 16384        # cached prompt length per sequence (cache rows per head)
HEAD_DIM = 128     # Mistral-7B head_dim
KEEP = 2048        # SnapKV token budget per head
WINDOW = 32        # SnapKV observation window (the newest positions, always kept)


@torch.no_grad()
def reference(key_cache, value_cache, keep_idx):
    # caches: (BATCH, KV_HEADS, SEQ, HEAD_DIM), contiguous (HF-style per-layer cache); keep_idx: (BATCH, KV_HEADS,
    # KEEP) int32, strictly increasing along the last axis. The caches are compacted in place.
    keep = keep_idx.shape[-1]
    index = keep_idx.long().unsqueeze(-1).expand(-1, -1, -1, key_cache.shape[-1])
    for cache in (key_cache, value_cache):
        kept = torch.gather(cache, 2, index)        # read every kept row before any is overwritten
        cache[:, :, :keep] = kept


def make_inputs():
    key_cache = torch.randn(BATCH, KV_HEADS, SEQ, HEAD_DIM, dtype=torch.bfloat16)
    value_cache = torch.randn(BATCH, KV_HEADS, SEQ, HEAD_DIM, dtype=torch.bfloat16)
    # Per head: KEEP - WINDOW positions chosen from the prefix (heavy hitters, clustered like real attention
    # scores: a random score plus a per-head bias towards a few regions), plus the WINDOW newest positions.
    prefix = SEQ - WINDOW
    score = torch.rand(BATCH, KV_HEADS, prefix)
    centers = torch.randint(0, prefix, (BATCH, KV_HEADS, 4, 1))
    spread = torch.arange(prefix).view(1, 1, 1, prefix)
    score = score + (-((spread - centers).abs().float() / (prefix / 64))).exp().sum(dim=2)
    chosen = score.topk(KEEP - WINDOW, dim=-1).indices
    window = torch.arange(prefix, SEQ).expand(BATCH, KV_HEADS, WINDOW)
    keep_idx = torch.cat((chosen, window), dim=-1).sort(dim=-1).values.to(torch.int32).contiguous()
    return [key_cache, value_cache, keep_idx]
