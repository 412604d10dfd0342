"""LayerNorm backward (StarCoder2-15B training step: hidden 6144, bf16 activations): from dy, x, the forward's saved fp32 mean and rstd, and weight, return dx (bf16) and dweight, dbias reduced over all tokens (fp32)."""
import torch

TOKENS = 8192
HIDDEN = 6144
EPS = 1e-5


@torch.no_grad()
def reference(dy: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor, weight: torch.Tensor):
    # Forward (saved per token): xhat = (x - mean) * rstd, y = xhat * weight + bias. Backward with g = dy * weight:
    #   dx = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat)), dweight = sum_t dy * xhat, dbias = sum_t dy.
    # Computed in float32 (float64 for the judge's anchor); dx is rounded to the activation dtype, the parameter
    # gradients stay in the accumulation dtype, as float32 master-gradient buffers hold them.
    acc = torch.float64 if dy.dtype == torch.float64 else torch.float32
    dyf = dy.to(acc)
    xhat = (x.to(acc) - mean.to(acc)[:, None]) * rstd.to(acc)[:, None]
    g = dyf * weight.to(acc)
    dx = rstd.to(acc)[:, None] * (g - g.mean(dim=-1, keepdim=True) - xhat * (g * xhat).mean(dim=-1, keepdim=True))
    dweight = (dyf * xhat).sum(dim=0)
    dbias = dyf.sum(dim=0)
    return dx.to(dy.dtype), dweight, dbias


def make_inputs():
    # Rows carry a per-token offset larger than their spread (as in the forward problem), and mean / rstd are the
    # forward's float32 statistics of the bf16 x.
    x = (torch.randn(TOKENS, HIDDEN) + 4.0 * torch.randn(TOKENS, 1)).to(torch.bfloat16)
    xf = x.float()
    mean = xf.mean(dim=-1)
    rstd = torch.rsqrt((xf - mean[:, None]).pow(2).mean(dim=-1) + EPS)
    weight = (1.0 + 0.1 * torch.randn(HIDDEN)).to(torch.bfloat16)
    dy = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)
    return [dy, x, mean, rstd, weight]
