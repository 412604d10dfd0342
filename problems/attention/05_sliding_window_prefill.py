"""Causal sliding-window GQA prefill attention over head-major (batch, heads, seq, dim) tensors (Mistral-7B-v0.1: 32 query / 8 KV heads, head_dim 128, sliding_window 4096, bf16): query i attends to keys i - window + 1 .. i only."""
import math

import torch

BATCH = 1
SEQ_LEN = 16384  # prompt length, four windows long
NUM_Q_HEADS = 32
NUM_KV_HEADS = 8
HEAD_DIM = 128
WINDOW = 4096  # Mistral-7B-v0.1 sliding_window, passed to the kernel as a scalar input


@torch.no_grad()
def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int):
    # q: (batch, q_heads, seq, d); k, v: (batch, kv_heads, seq, d); window: keys per query, the query's own key
    # included: query i attends to keys j with i - window < j <= i.
    batch, q_heads, seq, d = q.shape
    kv_heads = k.shape[1]
    group = q_heads // kv_heads
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    scale = 1.0 / math.sqrt(d)
    out = torch.empty(batch, q_heads, seq, d, dtype=acc, device=q.device)
    chunk = max(1, min(window, seq))
    for b in range(batch):
        for h in range(kv_heads):
            for s0 in range(0, seq, chunk):  # a block of queries sees only the keys of its band
                s1 = min(s0 + chunk, seq)
                k0 = max(0, s0 - window + 1)
                qi = torch.arange(s0, s1, device=q.device)[:, None]
                kj = torch.arange(k0, s1, device=q.device)[None, :]
                visible = (kj <= qi) & (kj > qi - window)
                qh = q[b, h * group:(h + 1) * group, s0:s1].to(acc)  # (group, n, d)
                kh = k[b, h, k0:s1].to(acc)  # (m, d)
                vh = v[b, h, k0:s1].to(acc)
                scores = torch.einsum("gnd,md->gnm", qh, kh) * scale
                scores = scores.masked_fill(~visible, float("-inf"))
                probs = torch.softmax(scores, dim=-1)
                out[b, h * group:(h + 1) * group, s0:s1] = torch.einsum("gnm,md->gnd", probs, vh)
    return out.to(q.dtype)


def make_inputs():
    q = torch.randn(BATCH, NUM_Q_HEADS, SEQ_LEN, HEAD_DIM, dtype=torch.bfloat16)
    k = torch.randn(BATCH, NUM_KV_HEADS, SEQ_LEN, HEAD_DIM, dtype=torch.bfloat16)
    v = torch.randn(BATCH, NUM_KV_HEADS, SEQ_LEN, HEAD_DIM, dtype=torch.bfloat16)
    return [q, k, v, WINDOW]
