"""Sliding-window decode attention with learned per-head attention sinks over a head-major KV cache (gpt-oss-20b: 64 query / 8 KV heads, head_dim 64, sliding_window 128): each query attends to its sequence's last 128 keys, and the head's sink logit joins the softmax denominator."""
import math

import torch

BATCH = 64
NUM_Q_HEADS = 64
NUM_KV_HEADS = 8
HEAD_DIM = 64
MAX_CONTEXT = 4096  # cache capacity per sequence; each sequence's length is drawn in [1, MAX_CONTEXT]
WINDOW = 128  # gpt-oss sliding_window (a model constant: the solutions assume 128)


@torch.no_grad()
def reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, sinks: torch.Tensor,
              context_lens: torch.Tensor):
    # q: (batch, q_heads, d); k_cache, v_cache: (batch, kv_heads, max_context, d), head-major: token t of
    # sequence b, KV head h at [b, h, t]; sinks: (q_heads,) float32 learned sink logits; context_lens: (batch,)
    # int32. The query (at position len - 1) sees keys t in [max(0, len - WINDOW), len), scores scaled by
    # 1/sqrt(d); softmax over those scores and the sink, whose probability is dropped (it has no value).
    batch, q_heads, d = q.shape
    kv_heads = k_cache.shape[1]
    group = q_heads // kv_heads
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    dev = q.device
    pos = context_lens.long()[:, None] - WINDOW + torch.arange(WINDOW, device=dev)[None, :]  # (batch, WINDOW)
    valid = pos >= 0
    pos = pos.clamp(min=0)
    bi = torch.arange(batch, device=dev)[:, None, None]
    hi = torch.arange(kv_heads, device=dev)[None, :, None]
    k = k_cache[bi, hi, pos[:, None, :]].to(acc)  # (batch, kv_heads, WINDOW, d)
    v = v_cache[bi, hi, pos[:, None, :]].to(acc)
    qg = q.to(acc).reshape(batch, kv_heads, group, d)
    scores = torch.einsum("bhgd,bhtd->bhgt", qg, k) * (1.0 / math.sqrt(d))
    scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
    sink = sinks.to(acc).reshape(1, kv_heads, group, 1).expand(batch, kv_heads, group, 1)
    probs = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :WINDOW]
    out = torch.einsum("bhgt,bhtd->bhgd", probs, v)
    return out.reshape(batch, q_heads, d).to(q.dtype)


def make_inputs():
    q = torch.randn(BATCH, NUM_Q_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    k_cache = torch.randn(BATCH, NUM_KV_HEADS, MAX_CONTEXT, HEAD_DIM, dtype=torch.bfloat16)
    v_cache = torch.randn(BATCH, NUM_KV_HEADS, MAX_CONTEXT, HEAD_DIM, dtype=torch.bfloat16)
    # sink logits near the log-sum-exp of a full window of O(1) scores (~5), so the sink takes a real share
    sinks = 4.0 + 2.0 * torch.randn(NUM_Q_HEADS, dtype=torch.float32)
    context_lens = torch.randint(1, MAX_CONTEXT + 1, (BATCH,), dtype=torch.int32)
    # sequence 0 is always shorter than the window, so a partial window is in every draw
    context_lens[0] = torch.randint(1, min(WINDOW, MAX_CONTEXT) + 1, (1,), dtype=torch.int32)
    return [q, k_cache, v_cache, sinks, context_lens]
