"""SmoothQuant W8A8 activation quantization for Llama-3.1-8B (hidden 4096): per-channel smoothing x_s = x / smooth (fp32 smoothing factors), then dynamic per-token symmetric int8, scale = max(amax_row|x_s|, 1e-6) / 127 and q = clamp(round(x_s / scale), -127, 127); return (q int8 (TOKENS, HIDDEN), scale fp32 (TOKENS, 1))."""
import torch

TOKENS = 4096       # tokens of one prefill batch
HIDDEN = 4096       # Llama-3.1-8B hidden_size
INT8_MAX = 127.0
AMAX_FLOOR = 1e-6   # keeps an all-zero row's scale finite
OUTLIER_CHANNELS = 32   # activation outlier channels, the ones SmoothQuant migrates into the weights


@torch.no_grad()
def reference(x: torch.Tensor, smooth: torch.Tensor):
    # x: (TOKENS, HIDDEN) bf16; smooth: (HIDDEN,) fp32. Math in float32 (float64 for the judge's anchor).
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    xs = x.to(acc) / smooth.to(acc)
    amax = xs.abs().amax(dim=-1, keepdim=True).clamp_min(AMAX_FLOOR)
    scale = amax / INT8_MAX
    q = torch.round(xs / scale).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
    return q, scale.to(torch.float32)


def _tie_free(x, smooth):
    # The int8 codes are compared exactly, so no element may sit near a rounding boundary k + 0.5 (a float32 kernel
    # that multiplies by 127 / amax instead of dividing would round it the other way). Move each such element one
    # bf16 step toward zero (|x_s / scale| changes by >= 2^-9 relative, far more than the margin) until none is
    # left; the row's absmax element lands on 127 and is never moved. Power-of-two outlier scaling keeps this.
    for _ in range(8):
        xs = x.double() / smooth.double()
        r = (xs / (xs.abs().amax(dim=-1, keepdim=True) / INT8_MAX)).abs()
        near = ((r - r.floor()) - 0.5).abs() < 2e-4
        if not bool(near.any()):
            break
        # bf16 is sign-magnitude: one step toward zero is the int16 view minus one, for either sign (x != 0 here)
        toward_zero = (x.view(torch.int16) - 1).view(torch.bfloat16)
        x = torch.where(near, toward_zero, x)
    return x


def make_inputs():
    # A few channels carry outliers 10-50x the rest (the activation pattern SmoothQuant targets); the smoothing
    # factors are sqrt of the channel magnitude (alpha = 0.5) with per-channel jitter, and rows vary in range.
    mag = torch.ones(HIDDEN)
    idx = torch.randperm(HIDDEN)[:OUTLIER_CHANNELS]
    mag[idx] = 10.0 + 40.0 * torch.rand(OUTLIER_CHANNELS)
    x = torch.randn(TOKENS, HIDDEN) * mag * torch.exp(0.5 * torch.randn(TOKENS, 1))
    smooth = (mag.sqrt() * torch.exp(0.2 * torch.randn(HIDDEN))).float()
    x = _tie_free(x.to(torch.bfloat16), smooth)
    return [x, smooth]
