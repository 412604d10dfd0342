"""Causal GQA prefill attention over a ragged batch packed by cu_seqlens (Llama-3.1-8B: 32 query / 8 KV heads, head_dim 128, bf16): each token attends to the keys at or before it in its own sequence."""
import math

import torch

TOTAL_TOKENS = 8192  # tokens of the packed batch (a chunked-prefill step)
BATCH = 8  # sequences in the batch; their lengths are ragged and sum to TOTAL_TOKENS
NUM_Q_HEADS = 32
NUM_KV_HEADS = 8
HEAD_DIM = 128


@torch.no_grad()
def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor):
    # q: (total_tokens, q_heads, d); k, v: (total_tokens, kv_heads, d), the sequences packed one after another;
    # cu_seqlens: (batch + 1,) int32, sequence i owns tokens cu_seqlens[i] .. cu_seqlens[i + 1] - 1.
    total, q_heads, d = q.shape
    kv_heads = k.shape[1]
    group = q_heads // kv_heads
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    scale = 1.0 / math.sqrt(d)
    out = torch.empty(total, q_heads, d, dtype=acc, device=q.device)
    bounds = cu_seqlens.tolist()
    for i in range(len(bounds) - 1):
        s, e = bounds[i], bounds[i + 1]
        n = e - s
        if n <= 0:
            continue
        causal = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        for h in range(kv_heads):  # one KV head (and its group of query heads) at a time bounds the score memory
            qh = q[s:e, h * group:(h + 1) * group].to(acc)  # (n, group, d)
            kh = k[s:e, h].to(acc)  # (n, d)
            vh = v[s:e, h].to(acc)
            scores = torch.einsum("tgd,sd->gts", qh, kh) * scale
            scores = scores.masked_fill(~causal, float("-inf"))
            probs = torch.softmax(scores, dim=-1)
            out[s:e, h * group:(h + 1) * group] = torch.einsum("gts,sd->tgd", probs, vh)
    return out.to(q.dtype)


def make_inputs():
    q = torch.randn(TOTAL_TOKENS, NUM_Q_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    k = torch.randn(TOTAL_TOKENS, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    v = torch.randn(TOTAL_TOKENS, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    # BATCH - 1 distinct cut points in 1 .. TOTAL_TOKENS - 1: every sequence has at least one token.
    cuts = torch.randperm(TOTAL_TOKENS - 1)[:BATCH - 1].sort().values + 1
    cu_seqlens = torch.cat([torch.zeros(1, dtype=torch.long), cuts,
                            torch.full((1,), TOTAL_TOKENS, dtype=torch.long)]).to(torch.int32)
    return [q, k, v, cu_seqlens]
