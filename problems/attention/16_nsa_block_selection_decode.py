"""Native Sparse Attention selection branch at decode (NSA paper's shapes: 64 query / 4 KV heads, head_dim 128, selection block 64, top-16 blocks): each KV head's group of query heads attends only to the 64-token key blocks selected for that (sequence, KV head), gathered by int32 block indices (-1 = unused slot) from a head-major bf16 cache; keys past the sequence's length are masked."""
import math

import torch

BATCH = 16
NUM_Q_HEADS = 64
NUM_KV_HEADS = 4
HEAD_DIM = 128
MAX_CONTEXT = 65536  # cache capacity per sequence; each sequence's length is drawn in [1, MAX_CONTEXT]
TOP_N = 16  # selected blocks per (sequence, KV head)
BLOCK_SIZE = 64  # selection block size l' (a model constant the solutions assume)


@torch.no_grad()
def reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_indices: torch.Tensor,
              context_lens: torch.Tensor):
    # q: (batch, q_heads, d); k_cache, v_cache: (batch, kv_heads, max_context, d), head-major;
    # block_indices: (batch, kv_heads, top_n) int32 selected block ids (block j holds tokens j * BLOCK_SIZE ..
    # (j + 1) * BLOCK_SIZE - 1), distinct, -1 where unused; context_lens: (batch,) int32. Query head h uses the
    # selection of KV head h // (q_heads / kv_heads). Scores scaled by 1/sqrt(d); returns (batch, q_heads, d).
    batch, q_heads, d = q.shape
    kv_heads, max_tokens = k_cache.shape[1], k_cache.shape[2]
    group = q_heads // kv_heads
    top_n = block_indices.shape[2]
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    idx = block_indices.long()
    offs = torch.arange(BLOCK_SIZE, device=q.device)
    tok = idx.clamp(min=0)[..., None] * BLOCK_SIZE + offs  # (batch, kv_heads, top_n, BLOCK_SIZE)
    valid = (idx >= 0)[..., None] & (tok < context_lens.long()[:, None, None, None])
    tok = tok.clamp(max=max_tokens - 1).reshape(batch, kv_heads, top_n * BLOCK_SIZE, 1).expand(-1, -1, -1, d)
    k = torch.gather(k_cache, 2, tok).to(acc)  # (batch, kv_heads, top_n * BLOCK_SIZE, d)
    v = torch.gather(v_cache, 2, tok).to(acc)
    qg = q.to(acc).reshape(batch, kv_heads, group, d)
    scores = torch.einsum("bhgd,bhtd->bhgt", qg, k) * (1.0 / math.sqrt(d))
    scores = scores.masked_fill(~valid.reshape(batch, kv_heads, 1, top_n * BLOCK_SIZE), float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = torch.einsum("bhgt,bhtd->bhgd", probs, v)
    return out.reshape(batch, q_heads, d).to(q.dtype)


def make_inputs():
    q = torch.randn(BATCH, NUM_Q_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    k_cache = torch.randn(BATCH, NUM_KV_HEADS, MAX_CONTEXT, HEAD_DIM, dtype=torch.bfloat16)
    v_cache = torch.randn(BATCH, NUM_KV_HEADS, MAX_CONTEXT, HEAD_DIM, dtype=torch.bfloat16)
    context_lens = torch.randint(1, MAX_CONTEXT + 1, (BATCH,), dtype=torch.int32)
    # sequence 0 has fewer blocks than TOP_N, so unused (-1) slots occur in every draw
    short = max(1, min(MAX_CONTEXT, (TOP_N - 1) * BLOCK_SIZE))
    context_lens[0] = torch.randint(1, short + 1, (1,), dtype=torch.int32)
    block_indices = torch.full((BATCH, NUM_KV_HEADS, TOP_N), -1, dtype=torch.int32)
    for b in range(BATCH):
        blocks = (int(context_lens[b]) + BLOCK_SIZE - 1) // BLOCK_SIZE
        for h in range(NUM_KV_HEADS):
            # like NSA: the first block and the current (last, partial) block are always selected, the rest are
            # each KV head's own choice; slots in random order
            if blocks <= TOP_N:
                chosen = torch.arange(blocks)
            else:
                middle = torch.randperm(blocks - 2)[:TOP_N - 2] + 1
                chosen = torch.cat([torch.tensor([0, blocks - 1]), middle])
            slots = torch.randperm(TOP_N)[:chosen.numel()]
            block_indices[b, h, slots] = chosen.to(torch.int32)
    return [q, k_cache, v_cache, block_indices, context_lens]
