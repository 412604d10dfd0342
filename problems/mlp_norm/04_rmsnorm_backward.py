"""RMSNorm backward (Llama-3.1-8B training step: hidden 4096, eps 1e-5): given x, weight and dy of y = x * rstd * weight, return dx (bf16) and dweight reduced over all tokens (fp32)."""
import torch

TOKENS = 8192
HIDDEN = 4096
EPS = 1e-5


@torch.no_grad()
def reference(x: torch.Tensor, weight: torch.Tensor, dy: torch.Tensor):
    # Forward: rstd = rsqrt(mean(x^2) + eps), xhat = x * rstd, y = xhat * weight.
    # Backward: g = dy * weight; dx = rstd * (g - xhat * mean(g * xhat)); dweight = sum over tokens of dy * xhat.
    # Computed in float32 (float64 for the judge's anchor); dx is rounded to the activation dtype, dweight is kept
    # in the accumulation dtype, as a float32 master-gradient buffer would hold it.
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf = x.to(acc)
    dyf = dy.to(acc)
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS)
    xhat = xf * rstd
    g = dyf * weight.to(acc)
    dx = rstd * (g - xhat * (g * xhat).mean(dim=-1, keepdim=True))
    dweight = (dyf * xhat).sum(dim=0)
    return dx.to(x.dtype), dweight


def make_inputs():
    x = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)
    weight = (1.0 + 0.1 * torch.randn(HIDDEN)).to(torch.bfloat16)
    dy = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)
    return [x, weight, dy]
