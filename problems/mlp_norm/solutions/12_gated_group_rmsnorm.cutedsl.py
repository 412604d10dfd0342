"""CuTe DSL (sm_90a) solution: one CTA of NGROUPS warps (8 x 32 threads) per token; warp g owns group g. Each
lane computes g = x * z / (1 + exp(-z)) in fp32 for channels lane, lane + 32, ... of its group, keeps them in a
register tensor and sums g^2; a warp-shuffle sum gives the group's rstd (no shared memory, no CTA barrier); then
the lane writes y = g * rstd * weight in bf16."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

EPS = 1e-5
NGROUPS = 8  # Mamba-2 2.7B with ngroups 8: not inferable from the input shapes
THREADS = NGROUPS * 32
_compiled = {}


def _make_kernel(gsize: int):
    per_lane = gsize // 32

    @cute.kernel
    def norm_kernel(gX: cute.Tensor, gZ: cute.Tensor, gW: cute.Tensor, gY: cute.Tensor, eps: cutlass.Float32):
        tidx, _, _ = cute.arch.thread_idx()
        row, _, _ = cute.arch.block_idx()
        base = (tidx // 32) * gsize + tidx % 32
        g = cute.make_rmem_tensor(per_lane, cutlass.Float32)
        acc = cutlass.Float32(0.0)
        for k in cutlass.range_constexpr(per_lane):
            zv = gZ[row, base + k * 32].to(cutlass.Float32)
            g[k] = gX[row, base + k * 32].to(cutlass.Float32) * zv / (cutlass.Float32(1.0) + cute.math.exp(-zv))
            acc = acc + g[k] * g[k]
        acc = cute.arch.warp_reduction_sum(acc)
        rstd = cute.math.rsqrt(acc / cutlass.Float32(gsize) + eps)
        for k in cutlass.range_constexpr(per_lane):
            gY[row, base + k * 32] = (g[k] * rstd * gW[base + k * 32].to(cutlass.Float32)).to(gY.element_type)

    @cute.jit
    def norm(mX: cute.Tensor, mZ: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, eps: cutlass.Float32):
        norm_kernel(mX, mZ, mW, mY, eps).launch(grid=(mX.shape[0], 1, 1), block=(THREADS, 1, 1))

    return norm


def solve(x: torch.Tensor, z: torch.Tensor, weight: torch.Tensor):
    tokens, d_inner = x.shape
    if x.dtype != torch.bfloat16 or z.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 x, z and weight")
    if z.shape != x.shape or tuple(weight.shape) != (d_inner,):
        raise ValueError("z must match x and weight must be (D_INNER,)")
    if d_inner % (NGROUPS * 32) != 0:
        raise ValueError(f"D_INNER={d_inner} must be a multiple of NGROUPS * 32 = {NGROUPS * 32}")
    x = x.contiguous()
    y = torch.empty_like(x)
    args = [from_dlpack(t) for t in (x, z.contiguous(), weight.contiguous(), y)]
    key = (tokens, d_inner)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(d_inner // NGROUPS), *args, EPS)
    _compiled[key](*args, EPS)
    return y
