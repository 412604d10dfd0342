"""Fused RMSNorm + dynamic per-token fp8 (e4m3fn) quantization for Llama-3.1-8B (hidden 4096, rms_norm_eps 1e-5) as in vLLM's rms_norm_dynamic_per_token_quant: y = x * rsqrt(mean(x^2) + eps) * weight in float32, scale = max(amax_row(y), 1e-4) / 448, q = fp8(clamp(y / scale, -448, 448)); return (q (TOKENS, HIDDEN), scale (TOKENS, 1) fp32)."""
import torch

TOKENS = 4096
HIDDEN = 4096       # Llama-3.1-8B hidden_size
EPS = 1e-5          # Llama-3.1-8B rms_norm_eps
FP8_MAX = 448.0
AMAX_FLOOR = 1e-4


@torch.no_grad()
def reference(x: torch.Tensor, weight: torch.Tensor):
    # x: (TOKENS, HIDDEN) bf16, weight: (HIDDEN,) bf16. The norm, the row amax and the division run in float32
    # (float64 when the judge computes its anchor); the normalized row is not rounded before quantization.
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf = x.to(acc)
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS)
    y = xf * rstd * weight.to(acc)
    scale = y.abs().amax(dim=-1, keepdim=True).clamp_min(AMAX_FLOOR) / FP8_MAX
    q = (y / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale


def make_inputs():
    # Residual-stream activations: per-token magnitude varies, a few outlier channels are large (as in Llama).
    x = torch.randn(TOKENS, HIDDEN) * torch.exp(torch.randn(TOKENS, 1))
    x[:, torch.randperm(HIDDEN)[:8]] *= 20.0
    weight = (1.0 + 0.2 * torch.randn(HIDDEN)).to(torch.bfloat16)
    return [x.to(torch.bfloat16), weight]
