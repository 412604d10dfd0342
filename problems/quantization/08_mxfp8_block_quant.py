"""MX-style fp8 activation quantization at DeepSeek-V3's hidden size 7168 (the MXFP8 recipe, emulated on Hopper): per token and block of 32 channels, a shared power-of-two scale 2^e with e = ceil(log2(amax_block / 448)) (round-up mode, so no element overflows), stored as an e8m0 byte e + 127; q = fp8_e4m3fn(clamp(x / 2^e, -448, 448)); return (q (TOKENS, HIDDEN) fp8, scales (TOKENS, HIDDEN // 32) uint8)."""
import torch

TOKENS = 4096
HIDDEN = 7168       # DeepSeek-V3 hidden_size
BLOCK = 32          # MX block size along the last dim
FP8_MAX = 448.0     # e4m3fn largest finite value
E8M0_BIAS = 127
E_MIN = -127        # e8m0 byte 0; also the exponent of an all-zero block


@torch.no_grad()
def reference(x: torch.Tensor):
    # x: (TOKENS, HIDDEN) bf16. The exponent comes from frexp (exact: no log2 rounding), so float32 and the judge's
    # float64 anchor agree bit for bit; x / 2^e is exact, so the only rounding is the cast to e4m3fn (RNE).
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    tokens, hidden = x.shape
    xb = x.to(acc).reshape(tokens, hidden // BLOCK, BLOCK)
    amax = xb.abs().amax(dim=-1)
    mant, ex = torch.frexp(amax / FP8_MAX)           # amax / 448 = mant * 2^ex, mant in [0.5, 1)
    e = torch.where(mant == 0.5, ex - 1, ex)          # ceil(log2(.)): exact powers of two keep their exponent
    e = torch.where(amax == 0, torch.full_like(e, E_MIN), e).clamp(E_MIN, 127)
    scale = torch.exp2(e.to(acc)).unsqueeze(-1)
    q = (xb / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).reshape(tokens, hidden)
    return q, (e + E8M0_BIAS).to(torch.uint8)


def make_inputs():
    # Activations whose range varies per token and per channel, so neighbouring blocks get different exponents.
    x = torch.randn(TOKENS, HIDDEN) * torch.exp(torch.randn(TOKENS, 1)) * torch.exp(0.7 * torch.randn(HIDDEN))
    return [x.to(torch.bfloat16)]
