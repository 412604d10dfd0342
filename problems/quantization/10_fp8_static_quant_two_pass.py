"""Per-tensor fp8 (e4m3fn) current scaling, two passes, as Transformer Engine's Float8CurrentScaling quantises the GROUPS inputs of a grouped GEMM (vLLM's scaled_fp8_quant without a given scale, per tensor): Llama-3.1-70B hidden 8192, 4096 prefill tokens split over 4 tensors; per tensor g a first pass reduces amax_g over all its TOKENS x HIDDEN elements, scale_g = max(amax_g, 1e-12) / 448, then q = fp8(clamp(x_g / scale_g, -448, 448)); return (q (GROUPS, TOKENS, HIDDEN) fp8, scales (GROUPS,) fp32)."""
import torch

GROUPS = 4              # tensors quantised in one call, one scale each
TOKENS = 1024           # tokens per tensor (4096 in all)
HIDDEN = 8192           # Llama-3.1-70B hidden_size
FP8_MAX = 448.0
AMAX_FLOOR = 1e-12
OUTLIER_CHANNELS = 16   # massive-activation channels that set each tensor's scale


@torch.no_grad()
def reference(x: torch.Tensor):
    # Per-tensor amax and the division in float32 (float64 for the judge's anchor); round to fp8 (RNE) last.
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf = x.to(acc)
    scale = xf.abs().amax(dim=(1, 2)).clamp_min(AMAX_FLOOR) / FP8_MAX
    q = (xf / scale.reshape(-1, 1, 1)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale.to(torch.float32)


def make_inputs():
    # Each tensor has its own range; rows vary, and a few channels carry outliers 20-60x the rest: the single scale
    # is set by them, so most of each tensor lands in fp8's low exponents and subnormals.
    mag = torch.ones(GROUPS, 1, HIDDEN)
    for g in range(GROUPS):
        mag[g, 0, torch.randperm(HIDDEN)[:OUTLIER_CHANNELS]] = 20.0 + 40.0 * torch.rand(OUTLIER_CHANNELS)
    x = torch.randn(GROUPS, TOKENS, HIDDEN) * torch.exp(0.5 * torch.randn(GROUPS, TOKENS, 1)) * mag
    x = x * torch.exp(torch.randn(GROUPS, 1, 1))
    return [x.to(torch.bfloat16)]
