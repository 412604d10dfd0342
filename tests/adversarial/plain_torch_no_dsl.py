# mkb-adversarial: dsl=tirx device=cpu expect=dsl_launch
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: computes the whole answer in eager PyTorch and launches no DSL kernel at all
# must be rejected because: every solve call must launch a kernel compiled with the variant's DSL
"""Eager PyTorch only; imports the DSL so that the file looks like a TIRx submission."""
import torch
import tvm  # noqa: F401  (never used)

EPS = 1e-6


def solve(x, residual, weight):
    h = x.float() + residual.float()
    out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
    return out.to(x.dtype), h.to(x.dtype)
