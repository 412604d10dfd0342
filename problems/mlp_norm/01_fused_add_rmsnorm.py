"""Fused residual add + RMSNorm (Llama-3-8B decoder, prefill): h = x + residual; return (rmsnorm(h) * weight, h)."""
import torch

TOKENS = 4096
HIDDEN = 4096
EPS = 1e-6


@torch.no_grad()
def reference(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor):
    # Accumulate in float32 (float64 when the judge computes its anchor), round to the activation dtype at the end.
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    h = x.to(acc) + residual.to(acc)
    rstd = torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + EPS)
    out = (h * rstd * weight.to(acc)).to(x.dtype)
    return out, h.to(x.dtype)


def make_inputs():
    x = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)
    residual = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)
    weight = 1.0 + 0.1 * torch.randn(HIDDEN, dtype=torch.bfloat16)
    return [x, residual, weight]
