"""GQA decode attention over a paged KV cache (Llama-3-8B: 32 query / 8 KV heads, head_dim 128, page size 16): one query token per sequence."""
import math

import torch

BATCH = 64
NUM_Q_HEADS = 32
NUM_KV_HEADS = 8
HEAD_DIM = 128
PAGE_SIZE = 16
MAX_CONTEXT = 4096  # longest context in the batch; each sequence's length is drawn in [1, MAX_CONTEXT]


@torch.no_grad()
def reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
              block_tables: torch.Tensor, context_lens: torch.Tensor):
    # q: (batch, q_heads, d); k_cache, v_cache: (num_pages, page_size, kv_heads, d);
    # block_tables: (batch, max_pages) int32 page ids; context_lens: (batch,) int32 tokens in each sequence.
    batch, q_heads, d = q.shape
    page_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = q_heads // kv_heads
    max_tokens = block_tables.shape[1] * page_size
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    pages = block_tables.long()
    k = k_cache[pages].reshape(batch, max_tokens, kv_heads, d).to(acc)
    v = v_cache[pages].reshape(batch, max_tokens, kv_heads, d).to(acc)
    qg = q.to(acc).reshape(batch, kv_heads, group, d)
    scores = torch.einsum("bhgd,bthd->bhgt", qg, k) * (1.0 / math.sqrt(d))
    pos = torch.arange(max_tokens, device=q.device)
    masked = pos[None, :] >= context_lens.long()[:, None]  # (batch, max_tokens)
    scores = scores.masked_fill(masked[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = torch.einsum("bhgt,bthd->bhgd", probs, v)
    return out.reshape(batch, q_heads, d).to(q.dtype)


def make_inputs():
    max_pages = (MAX_CONTEXT + PAGE_SIZE - 1) // PAGE_SIZE
    num_pages = BATCH * max_pages
    q = torch.randn(BATCH, NUM_Q_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    k_cache = torch.randn(num_pages, PAGE_SIZE, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    v_cache = torch.randn(num_pages, PAGE_SIZE, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    # Every sequence owns distinct pages, scattered over the pool.
    block_tables = torch.randperm(num_pages).reshape(BATCH, max_pages).to(torch.int32)
    context_lens = torch.randint(1, MAX_CONTEXT + 1, (BATCH,), dtype=torch.int32)
    return [q, k_cache, v_cache, block_tables, context_lens]
