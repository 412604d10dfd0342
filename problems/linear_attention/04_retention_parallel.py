"""RetNet parallel retention over one block (RetNet-1.3B: hidden 2048, 8 heads, key head_dim 256, value head_dim 512): o = ((q k^T) * DK**-0.5 * D) v per (batch, head) with the causal decay mask D[n, m] = gamma_h^(n - m) for m <= n (0 above the diagonal) and gamma_h = 1 - 2^-(5 + h); no softmax, fp32 math, bf16 output."""
import torch

BATCH = 4
NUM_HEADS = 8       # RetNet-1.3B retention heads
SEQLEN = 2048       # block length
HEAD_K_DIM = 256    # hidden 2048 / 8 heads
HEAD_V_DIM = 512    # value dim = 2 x hidden (RetNet's value_factor 2)


@torch.no_grad()
def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    # q, k: (BATCH, NUM_HEADS, SEQLEN, HEAD_K_DIM) bf16; v: (BATCH, NUM_HEADS, SEQLEN, HEAD_V_DIM) bf16.
    # Math in float32 (float64 when the judge computes its anchor).
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    heads, seqlen, dk = q.shape[1], q.shape[2], q.shape[3]
    gamma = 1.0 - torch.pow(2.0, -5.0 - torch.arange(heads, dtype=acc, device=q.device))      # (H,)
    pos = torch.arange(seqlen, device=q.device)
    dist = (pos[:, None] - pos[None, :]).to(acc)                                                # n - m
    decay = torch.where(dist >= 0, gamma[:, None, None] ** dist.clamp_min(0), torch.zeros((), dtype=acc,
                                                                                          device=q.device))
    scores = (q.to(acc) @ k.to(acc).transpose(-1, -2)) * (dk ** -0.5) * decay                   # (B, H, L, L)
    return (scores @ v.to(acc)).to(q.dtype)


def make_inputs():
    q = torch.randn(BATCH, NUM_HEADS, SEQLEN, HEAD_K_DIM, dtype=torch.bfloat16)
    k = torch.randn(BATCH, NUM_HEADS, SEQLEN, HEAD_K_DIM, dtype=torch.bfloat16)
    v = torch.randn(BATCH, NUM_HEADS, SEQLEN, HEAD_V_DIM, dtype=torch.bfloat16)
    return [q, k, v]
