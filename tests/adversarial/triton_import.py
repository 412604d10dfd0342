# mkb-adversarial: dsl=tirx device=cpu expect=static
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: imports Triton to write the kernel in another DSL
# must be rejected because: only torch, numpy, small stdlib helpers and the variant's DSL may be imported
import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm(x_ptr, r_ptr, w_ptr, y_ptr, h_ptr, n: tl.constexpr):
    pass


def solve(x, residual, weight):
    out = torch.empty_like(x)
    h = torch.empty_like(x)
    _rmsnorm[(x.shape[0],)](x, residual, weight, out, h, x.shape[1])
    return out, h
