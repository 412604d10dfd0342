"""Chunked causal linear attention forward without decay (Lightning-Attention style as in MiniMax-Text-01: 64 heads, head_dim 128, chunk 64): per (batch, head) and chunk c, o_c = tril((s q_c) k_c^T) v_c + (s q_c) S_{c-1} with s = HEAD_DIM**-0.5 and the running state S_c = S_{c-1} + k_c^T v_c (S_{-1} = 0); returns (o (BATCH, NUM_HEADS, SEQLEN, HEAD_DIM) bf16, final state S (BATCH, NUM_HEADS, HEAD_DIM, HEAD_DIM) fp32)."""
import torch

BATCH = 2
NUM_HEADS = 64      # MiniMax-Text-01 attention heads
SEQLEN = 4096
HEAD_DIM = 128      # MiniMax-Text-01 head_dim
CHUNK = 64          # intra-chunk block (Lightning Attention's BLOCK)


@torch.no_grad()
def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    # q, k, v: (BATCH, NUM_HEADS, SEQLEN, HEAD_DIM) bf16. Math in float32 (float64 for the judge's anchor).
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    batch, heads, seqlen, dim = q.shape
    chunk = CHUNK
    qf = q.to(acc) * dim ** -0.5
    kf, vf = k.to(acc), v.to(acc)
    causal = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    state = torch.zeros(batch, heads, dim, v.shape[-1], dtype=acc, device=q.device)
    outs = []
    for c in range(seqlen // chunk):
        qc, kc, vc = (t[:, :, c * chunk:(c + 1) * chunk] for t in (qf, kf, vf))
        scores = (qc @ kc.transpose(-1, -2)).masked_fill(~causal, 0.0)
        outs.append(scores @ vc + qc @ state)          # intra-chunk + inter-chunk (all earlier chunks)
        state = state + kc.transpose(-1, -2) @ vc
    return torch.cat(outs, dim=2).to(q.dtype), state


def make_inputs():
    shape = (BATCH, NUM_HEADS, SEQLEN, HEAD_DIM)
    q = torch.randn(shape, dtype=torch.bfloat16)
    k = torch.randn(shape, dtype=torch.bfloat16)
    v = torch.randn(shape, dtype=torch.bfloat16)
    return [q, k, v]
