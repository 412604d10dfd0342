"""Mamba-2 gated group RMSNorm (the mixer output norm, RMSNormGated with norm_before_gate=False, of Mamba-2 2.7B: d_inner 5120, eps 1e-5, prefill; split into ngroups = 8 groups of 640 channels, Mamba-2's tensor-parallel grouping, where the released 2.7B checkpoint uses 1): g = x * silu(z); y = g * rsqrt(mean over each group of g^2 + eps) * weight; bf16 in/out, fp32 math."""
import torch
import torch.nn.functional as F

TOKENS = 4096
D_INNER = 5120   # Mamba-2 2.7B: expand 2 * d_model 2560
NGROUPS = 8      # the norm's groups (group size D_INNER // NGROUPS); solve uses 8 (not inferable from the inputs)
EPS = 1e-5


@torch.no_grad()
def reference(x: torch.Tensor, z: torch.Tensor, weight: torch.Tensor):
    # x, z: (TOKENS, D_INNER) bf16 (the SSM output and the gate branch); weight: (D_INNER,) bf16.
    # Gate, norm and scale run in float32 (float64 for the judge's anchor); only y is rounded.
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    tokens, d_inner = x.shape
    g = x.to(acc) * F.silu(z.to(acc))
    gg = g.reshape(tokens, NGROUPS, d_inner // NGROUPS)
    rstd = torch.rsqrt(gg.pow(2).mean(dim=-1, keepdim=True) + EPS)
    y = (gg * rstd).reshape(tokens, d_inner) * weight.to(acc)
    return y.to(x.dtype)


def make_inputs():
    # Each group gets its own activation scale, so a norm taken over the whole row (or the wrong groups) is wrong.
    group_scale = torch.exp(torch.randn(TOKENS, NGROUPS, 1))
    x = (torch.randn(TOKENS, NGROUPS, D_INNER // NGROUPS) * group_scale).reshape(TOKENS, D_INNER)
    z = 2.0 * torch.randn(TOKENS, D_INNER)
    weight = 1.0 + 0.2 * torch.randn(D_INNER)
    return [x.to(torch.bfloat16), z.to(torch.bfloat16), weight.to(torch.bfloat16)]
