"""Per-head RMSNorm of q and k in one fused op, in place (Qwen3-8B attention, prefill: 32 q heads, 8 kv heads, head_dim 128, eps 1e-6): every q head becomes rmsnorm(head) * q_weight and every k head rmsnorm(head) * k_weight; returns None."""
import torch

TOKENS = 4096
NUM_Q_HEADS = 32
NUM_KV_HEADS = 8
HEAD_DIM = 128
EPS = 1e-6


@torch.no_grad()
def reference(q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor):
    # q: (TOKENS, NUM_Q_HEADS, HEAD_DIM), k: (TOKENS, NUM_KV_HEADS, HEAD_DIM); the weights are (HEAD_DIM,), shared
    # by all heads of q (resp. k). The mean of squares runs over one head's HEAD_DIM values, in float32 (float64 for
    # the judge's anchor); x * rstd * weight is rounded once to the activation dtype and written back in place.
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    for x, weight in ((q, q_weight), (k, k_weight)):
        xf = x.to(acc)
        rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS)
        x.copy_((xf * rstd * weight.to(acc)).to(x.dtype))


def make_inputs():
    # Every head of every token gets its own scale, so a norm over the wrong axis (the token, the whole row) is
    # visibly wrong.
    q = (torch.randn(TOKENS, NUM_Q_HEADS, HEAD_DIM) * torch.exp(0.5 * torch.randn(TOKENS, NUM_Q_HEADS, 1)))
    k = (torch.randn(TOKENS, NUM_KV_HEADS, HEAD_DIM) * torch.exp(0.5 * torch.randn(TOKENS, NUM_KV_HEADS, 1)))
    q_weight = (1.0 + 0.1 * torch.randn(HEAD_DIM)).to(torch.bfloat16)
    k_weight = (1.0 + 0.1 * torch.randn(HEAD_DIM)).to(torch.bfloat16)
    return [q.to(torch.bfloat16), k.to(torch.bfloat16), q_weight, k_weight]
