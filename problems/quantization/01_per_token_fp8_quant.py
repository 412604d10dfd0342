"""Dynamic per-token fp8 (e4m3fn) activation quantization: scale = max(amax_row, 1e-4) / 448, q = fp8(clamp(x / scale, -448, 448)); return (q, scale)."""
import torch

TOKENS = 4096
HIDDEN = 8192
FP8_MAX = 448.0
AMAX_FLOOR = 1e-4


@torch.no_grad()
def reference(x: torch.Tensor):
    # Row amax and the division in float32 (float64 when the judge computes its anchor); round to fp8 (RNE) last.
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf = x.to(acc)
    amax = xf.abs().amax(dim=-1, keepdim=True).clamp_min(AMAX_FLOOR)
    scale = amax / FP8_MAX
    q = (xf / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale


def make_inputs():
    x = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)
    # Per-token dynamic range varies (as real activations do), so each row gets a different scale.
    x = x * torch.exp(torch.randn(TOKENS, 1)).to(torch.bfloat16)
    return [x]
