"""Chunked-prefill GQA attention over a paged prefix (Llama-3.1-8B: 32 query / 8 KV heads, head_dim 128, page size 16, bf16): each sequence's new chunk of query tokens, packed by cu_seqlens, attends to all of that sequence's cached prefix (read from a paged KV cache through its block table) and causally to the chunk's own keys."""
import math

import torch

TOTAL_TOKENS = 4096  # new tokens of the packed batch (the scheduler's chunk budget for one step)
BATCH = 8  # sequences; their chunk lengths are ragged and sum to TOTAL_TOKENS
NUM_Q_HEADS = 32
NUM_KV_HEADS = 8
HEAD_DIM = 128
PAGE_SIZE = 16
MAX_PREFIX = 8192  # longest cached prefix; each sequence's prefix length is drawn in [0, MAX_PREFIX]


@torch.no_grad()
def reference(q: torch.Tensor, k_new: torch.Tensor, v_new: torch.Tensor, k_cache: torch.Tensor,
              v_cache: torch.Tensor, block_tables: torch.Tensor, prefix_lens: torch.Tensor,
              cu_seqlens: torch.Tensor):
    # q: (total_tokens, q_heads, d); k_new, v_new: (total_tokens, kv_heads, d), the chunks packed one after another;
    # k_cache, v_cache: (num_pages, page_size, kv_heads, d); block_tables: (batch, max_pages) int32 page ids of each
    # sequence's prefix; prefix_lens: (batch,) int32 cached tokens per sequence; cu_seqlens: (batch + 1,) int32,
    # sequence b's chunk is tokens cu_seqlens[b] .. cu_seqlens[b + 1] - 1. Chunk token i (0-based in its chunk)
    # sees prefix tokens 0 .. prefix_len - 1 and chunk tokens 0 .. i. Returns (total_tokens, q_heads, d) in q's dtype.
    total, q_heads, d = q.shape
    page_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = q_heads // kv_heads
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    scale = 1.0 / math.sqrt(d)
    out = torch.empty(total, q_heads, d, dtype=acc, device=q.device)
    bounds = cu_seqlens.tolist()
    plens = prefix_lens.tolist()
    for b in range(len(bounds) - 1):
        s, e = bounds[b], bounds[b + 1]
        n, p = e - s, plens[b]
        if n <= 0:
            continue
        npages = (p + page_size - 1) // page_size
        pages = block_tables[b, :npages].long()
        kp = k_cache[pages].reshape(npages * page_size, kv_heads, d)[:p]
        vp = v_cache[pages].reshape(npages * page_size, kv_heads, d)[:p]
        keys = torch.cat([kp, k_new[s:e]], dim=0).to(acc)  # (p + n, kv_heads, d)
        vals = torch.cat([vp, v_new[s:e]], dim=0).to(acc)
        # chunk token i sees key j when j < p + i + 1
        visible = torch.arange(p + n, device=q.device)[None, :] <= (p + torch.arange(n, device=q.device))[:, None]
        for h in range(q_heads):  # one query head at a time bounds the score memory
            scores = (q[s:e, h].to(acc) @ keys[:, h // group].T) * scale
            probs = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
            out[s:e, h] = probs @ vals[:, h // group]
    return out.to(q.dtype)


def make_inputs():
    max_pages = (MAX_PREFIX + PAGE_SIZE - 1) // PAGE_SIZE
    num_pages = BATCH * max_pages
    q = torch.randn(TOTAL_TOKENS, NUM_Q_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    k_new = torch.randn(TOTAL_TOKENS, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    v_new = torch.randn(TOTAL_TOKENS, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    k_cache = torch.randn(num_pages, PAGE_SIZE, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    v_cache = torch.randn(num_pages, PAGE_SIZE, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    # every sequence owns distinct pages, scattered over the pool
    block_tables = torch.randperm(num_pages).reshape(BATCH, max_pages).to(torch.int32)
    prefix_lens = torch.randint(0, MAX_PREFIX + 1, (BATCH,), dtype=torch.int32)
    # BATCH - 1 distinct cut points in 1 .. TOTAL_TOKENS - 1: every chunk has at least one token
    cuts = torch.randperm(TOTAL_TOKENS - 1)[:BATCH - 1].sort().values + 1
    cu_seqlens = torch.cat([torch.zeros(1, dtype=torch.long), cuts,
                            torch.full((1,), TOTAL_TOKENS, dtype=torch.long)]).to(torch.int32)
    return [q, k_new, v_new, k_cache, v_cache, block_tables, prefix_lens, cu_seqlens]
