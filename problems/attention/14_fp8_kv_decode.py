"""GQA decode attention over an fp8 (e4m3) paged KV cache with one fp32 scale per (token, KV head) for K and for V, dequantised inside the kernel (Qwen2.5-7B: 28 query / 4 KV heads, head_dim 128, page size 16, bf16 queries and output): one query token per sequence."""
import math

import torch

BATCH = 64
NUM_Q_HEADS = 28
NUM_KV_HEADS = 4
HEAD_DIM = 128
PAGE_SIZE = 16
MAX_CONTEXT = 8192  # longest context in the batch; each sequence's length is drawn in [1, MAX_CONTEXT]
FP8_MAX = 448.0  # largest finite float8_e4m3fn


@torch.no_grad()
def reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, k_scale: torch.Tensor,
              v_scale: torch.Tensor, block_tables: torch.Tensor, context_lens: torch.Tensor):
    # q: (batch, q_heads, d); k_cache, v_cache: (num_pages, page_size, kv_heads, d) float8_e4m3fn codes;
    # k_scale, v_scale: (num_pages, page_size, kv_heads) float32, the cached token's K (V) row of a head is
    # code * scale; block_tables: (batch, max_pages) int32 page ids; context_lens: (batch,) int32 tokens per
    # sequence. Returns (batch, q_heads, d) in q's dtype.
    batch, q_heads, d = q.shape
    page_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = q_heads // kv_heads
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    scale = 1.0 / math.sqrt(d)
    out = torch.empty(batch, q_heads, d, dtype=acc, device=q.device)
    lens = context_lens.tolist()
    for b in range(batch):  # one sequence at a time: only its pages are dequantised
        n = lens[b]
        npages = (n + page_size - 1) // page_size
        pages = block_tables[b, :npages].long()
        k = (k_cache[pages].to(acc) * k_scale[pages].to(acc)[..., None]).reshape(-1, kv_heads, d)[:n]
        v = (v_cache[pages].to(acc) * v_scale[pages].to(acc)[..., None]).reshape(-1, kv_heads, d)[:n]
        qg = q[b].to(acc).reshape(kv_heads, group, d)
        scores = torch.einsum("hgd,thd->hgt", qg, k) * scale
        probs = torch.softmax(scores, dim=-1)
        out[b] = torch.einsum("hgt,thd->hgd", probs, v).reshape(q_heads, d)
    return out.to(q.dtype)


def _quantise(x: torch.Tensor):
    # per-(token, head) absmax scaling of the last dimension to the e4m3 range
    s = x.abs().amax(dim=-1).clamp_min(1e-6) / FP8_MAX
    return (x / s[..., None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), s.to(torch.float32)


def make_inputs():
    max_pages = (MAX_CONTEXT + PAGE_SIZE - 1) // PAGE_SIZE
    num_pages = BATCH * max_pages
    q = torch.randn(BATCH, NUM_Q_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    # the K and V rows written to the cache (per-token magnitudes vary), then quantised per (token, head)
    k_cache, k_scale = _quantise(torch.randn(num_pages, PAGE_SIZE, NUM_KV_HEADS, HEAD_DIM)
                                 * torch.rand(num_pages, PAGE_SIZE, NUM_KV_HEADS, 1).add(0.25))
    v_cache, v_scale = _quantise(torch.randn(num_pages, PAGE_SIZE, NUM_KV_HEADS, HEAD_DIM)
                                 * torch.rand(num_pages, PAGE_SIZE, NUM_KV_HEADS, 1).add(0.25))
    # every sequence owns distinct pages, scattered over the pool
    block_tables = torch.randperm(num_pages).reshape(BATCH, max_pages).to(torch.int32)
    context_lens = torch.randint(1, MAX_CONTEXT + 1, (BATCH,), dtype=torch.int32)
    return [q, k_cache, v_cache, k_scale, v_scale, block_tables, context_lens]
