"""Causal GQA attention backward, the dK and dV part, recomputing the probabilities from FlashAttention's saved log-sum-exp and Delta = rowsum(dO * O) (Llama-3.1-8B: 32 query / 8 KV heads, head_dim 128, 4K-token training sequences): bf16 q, k, v, dO in, fp32 dK and dV out, each summed over the 4 query heads that share a KV head."""
import math

import torch

BATCH = 2
SEQ_LEN = 4096
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
def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dout: torch.Tensor, lse: torch.Tensor,
              delta: torch.Tensor):
    # q, dout: (batch, seq, heads, d); k, v: (batch, seq, kv_heads, d); lse, delta: (batch, heads, seq) float32,
    # the natural-log sum of exp of each query row's scaled causal scores and rowsum(dO * O), both saved by the
    # forward / preprocessing kernels. Per query head h of KV head g: P = exp(scale * q k^T - lse), dP = dO v^T,
    # dS = P * (dP - Delta); dV[g] = sum_h P^T dO, dK[g] = scale * sum_h dS^T q. Returns (dK, dV) in float32,
    # shaped like k.
    batch, seq, heads, d = q.shape
    kv_heads = k.shape[2]
    group = heads // kv_heads
    scale = 1.0 / math.sqrt(d)
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    dk = torch.zeros(batch, seq, kv_heads, d, dtype=acc, device=q.device)
    dv = torch.zeros(batch, seq, kv_heads, d, dtype=acc, device=q.device)
    for b in range(batch):
        for h in range(heads):  # one query head at a time: (seq, seq) intermediates
            g = h // group
            qh = q[b, :, h].to(acc)
            kh = k[b, :, g].to(acc)
            vh = v[b, :, g].to(acc)
            doh = dout[b, :, h].to(acc)
            p = torch.exp(_causal_scores(qh, kh, scale) - lse[b, h].to(acc)[:, None])
            dv[b, :, g] += p.T @ doh
            ds = p * (doh @ vh.T - delta[b, h].to(acc)[:, None])
            dk[b, :, g] += (ds.T @ qh) * scale
    return dk.to(torch.float32), dv.to(torch.float32)


def make_inputs():
    q = torch.randn(BATCH, SEQ_LEN, NUM_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    k = torch.randn(BATCH, SEQ_LEN, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    v = torch.randn(BATCH, SEQ_LEN, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    dout = torch.randn(BATCH, SEQ_LEN, NUM_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    # the forward pass in fp32, one head at a time: the log-sum-exp it saves, and o (stored in bf16) for
    # the backward preprocessing's Delta = rowsum(dO * o) in fp32
    group = NUM_HEADS // NUM_KV_HEADS
    scale = 1.0 / math.sqrt(HEAD_DIM)
    lse = torch.empty(BATCH, NUM_HEADS, SEQ_LEN, dtype=torch.float32)
    delta = torch.empty(BATCH, NUM_HEADS, SEQ_LEN, dtype=torch.float32)
    for b in range(BATCH):
        for h in range(NUM_HEADS):
            s = _causal_scores(q[b, :, h].float(), k[b, :, h // group].float(), scale)
            lse[b, h] = torch.logsumexp(s, dim=-1)
            o = (torch.softmax(s, dim=-1) @ v[b, :, h // group].float()).to(torch.bfloat16)
            delta[b, h] = (dout[b, :, h].float() * o.float()).sum(-1)
    return [q, k, v, dout, lse, delta]
