"""Flash-decoding first pass: GQA decode attention cut into fixed 512-token KV splits per (sequence, query head), writing each split's un-merged partial output and log-sum-exp (Llama-3.1-70B: 64 query / 8 KV heads, head_dim 128; ragged context lengths, so a sequence's last splits are partial or empty: output 0, log-sum-exp -inf)."""
import math

import torch

BATCH = 8
NUM_Q_HEADS = 64
NUM_KV_HEADS = 8
HEAD_DIM = 128
MAX_CONTEXT = 32768  # cache capacity per sequence; each sequence's length is drawn in [1, MAX_CONTEXT]
SPLIT_SIZE = 512  # KV tokens per split (a kernel constant the solutions assume, like vLLM's PARTITION_SIZE)


@torch.no_grad()
def reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, context_lens: torch.Tensor):
    # q: (batch, q_heads, d); k_cache, v_cache: (batch, max_context, kv_heads, d), token t of sequence b at [b, t];
    # context_lens: (batch,) int32. Split s covers tokens s * SPLIT_SIZE .. (s + 1) * SPLIT_SIZE - 1, clipped to the
    # sequence's length. Returns, per (sequence, query head, split), the softmax-weighted value average over that
    # split's keys alone, float32 (batch, q_heads, num_splits, d), and the log-sum-exp of its scaled scores,
    # float32 (batch, q_heads, num_splits); a split with no keys has output 0 and log-sum-exp -inf.
    batch, q_heads, d = q.shape
    max_tokens, kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = q_heads // kv_heads
    num_splits = (max_tokens + SPLIT_SIZE - 1) // SPLIT_SIZE
    padded = num_splits * SPLIT_SIZE
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    k = k_cache.to(acc)
    v = v_cache.to(acc)
    if padded > max_tokens:  # pad the cache to whole splits; the padding is masked below
        pad = (0, 0, 0, 0, 0, padded - max_tokens)
        k = torch.nn.functional.pad(k, pad)
        v = torch.nn.functional.pad(v, pad)
    qg = q.to(acc).reshape(batch, kv_heads, group, d)
    scores = torch.einsum("bhgd,bthd->bhgt", qg, k) * (1.0 / math.sqrt(d))
    pos = torch.arange(padded, device=q.device)
    masked = pos[None, :] >= context_lens.long()[:, None]  # (batch, padded)
    scores = scores.masked_fill(masked[:, None, None, :], float("-inf"))
    scores = scores.reshape(batch, kv_heads, group, num_splits, SPLIT_SIZE)
    lse = torch.logsumexp(scores, dim=-1)  # -inf where the split is empty
    shift = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
    probs = torch.exp(scores - shift[..., None])  # exactly 0 on masked keys, so empty splits give 0
    out = torch.einsum("bhgst,bsthd->bhgsd", probs, v.reshape(batch, num_splits, SPLIT_SIZE, kv_heads, d))
    out = out.reshape(batch, q_heads, num_splits, d)
    lse = lse.reshape(batch, q_heads, num_splits)
    out_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    return out.to(out_dtype), lse.to(out_dtype)


def make_inputs():
    q = torch.randn(BATCH, NUM_Q_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    k_cache = torch.randn(BATCH, MAX_CONTEXT, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    v_cache = torch.randn(BATCH, MAX_CONTEXT, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    context_lens = torch.randint(1, MAX_CONTEXT + 1, (BATCH,), dtype=torch.int32)
    # sequence 0 ends inside its first split, so every draw has partial and empty splits
    context_lens[0] = torch.randint(1, min(SPLIT_SIZE, MAX_CONTEXT) + 1, (1,), dtype=torch.int32)
    return [q, k_cache, v_cache, context_lens]
