"""Causal attention backward, the dQ part, recomputing the probabilities from FlashAttention's saved log-sum-exp (Llama-3.1-8B: 32 query / 8 KV heads, head_dim 128, 8K-token training sequences): bf16 q, k, v, o, dO in, fp32 dQ out."""
import math

import torch

BATCH = 1
SEQ_LEN = 8192
NUM_HEADS = 32
NUM_KV_HEADS = 8
HEAD_DIM = 128


def _causal_scores(qh: torch.Tensor, kh: torch.Tensor, scale: float) -> torch.Tensor:
    # (seq, d) x (seq, d) -> (seq, seq) scaled scores, -inf above the diagonal (key after query)
    s = (qh @ kh.T) * scale
    n = s.shape[0]
    future = torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1)
    return s.masked_fill(future, float("-inf"))


@torch.no_grad()
def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, dout: torch.Tensor,
              lse: torch.Tensor):
    # q, o, dout: (batch, seq, heads, d); k, v: (batch, seq, kv_heads, d); lse: (batch, heads, seq) float32,
    # the natural-log sum of exp of the scaled causal scores of each query row, as the forward pass saved it.
    # P = exp(scale * q k^T - lse), dP = dO v^T, Delta = rowsum(dO * o), dS = P * (dP - Delta),
    # dQ = scale * dS k. Returns dQ in float32, shaped like q.
    batch, seq, heads, d = q.shape
    kv_heads = k.shape[2]
    group = heads // kv_heads
    scale = 1.0 / math.sqrt(d)
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    dq = torch.empty(batch, seq, heads, d, dtype=acc, device=q.device)
    for b in range(batch):
        for h in range(heads):  # one head at a time: (seq, seq) intermediates
            qh = q[b, :, h].to(acc)
            kh = k[b, :, h // group].to(acc)
            vh = v[b, :, h // group].to(acc)
            doh = dout[b, :, h].to(acc)
            p = torch.exp(_causal_scores(qh, kh, scale) - lse[b, h].to(acc)[:, None])
            dp = doh @ vh.T
            delta = (doh * o[b, :, h].to(acc)).sum(-1)
            ds = p * (dp - delta[:, None])
            dq[b, :, h] = (ds @ kh) * scale
    return dq.to(torch.float32)


def make_inputs():
    q = torch.randn(BATCH, SEQ_LEN, NUM_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    k = torch.randn(BATCH, SEQ_LEN, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    v = torch.randn(BATCH, SEQ_LEN, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    dout = torch.randn(BATCH, SEQ_LEN, NUM_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    # the forward pass, in fp32, one head at a time: o (stored in bf16) and the log-sum-exp it saves
    group = NUM_HEADS // NUM_KV_HEADS
    scale = 1.0 / math.sqrt(HEAD_DIM)
    o = torch.empty(BATCH, SEQ_LEN, NUM_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    lse = torch.empty(BATCH, NUM_HEADS, SEQ_LEN, dtype=torch.float32)
    for b in range(BATCH):
        for h in range(NUM_HEADS):
            s = _causal_scores(q[b, :, h].float(), k[b, :, h // group].float(), scale)
            lse[b, h] = torch.logsumexp(s, dim=-1)
            o[b, :, h] = (torch.softmax(s, dim=-1) @ v[b, :, h // group].float()).to(torch.bfloat16)
    return [q, k, v, o, dout, lse]
