"""LayerNorm with weight and bias over the hidden dim (StarCoder2-15B decoder, prefill: hidden 6144, eps 1e-5): y = (x - mean) * rsqrt(var + eps) * weight + bias, bf16 in/out, fp32 statistics."""
import torch

TOKENS = 4096
HIDDEN = 6144
EPS = 1e-5


@torch.no_grad()
def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
    # Statistics in float32 (float64 when the judge computes its anchor); the variance is the biased one
    # (divided by HIDDEN), as torch.nn.LayerNorm computes it. One rounding to the activation dtype at the end.
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf = x.to(acc)
    mean = xf.mean(dim=-1, keepdim=True)
    xc = xf - mean
    var = (xc * xc).mean(dim=-1, keepdim=True)
    y = xc * torch.rsqrt(var + EPS) * weight.to(acc) + bias.to(acc)
    return y.to(x.dtype)


def make_inputs():
    # Rows carry a per-token offset larger than their spread, so a one-pass E[x^2] - E[x]^2 variance loses digits.
    x = torch.randn(TOKENS, HIDDEN, dtype=torch.float32) + 4.0 * torch.randn(TOKENS, 1, dtype=torch.float32)
    x = x.to(torch.bfloat16)
    weight = (1.0 + 0.1 * torch.randn(HIDDEN)).to(torch.bfloat16)
    bias = (0.1 * torch.randn(HIDDEN)).to(torch.bfloat16)
    return [x, weight, bias]
