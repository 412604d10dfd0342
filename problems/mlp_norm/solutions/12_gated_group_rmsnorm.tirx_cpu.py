"""CPU-target (LLVM) TIRx solution, the GPU solutions' algorithm run serially in fp32. Per token and group: 32
strided lanes (the GPU's warp) each compute g = x * z / (1 + exp(-z)) for channels lane, lane + 32, ... of the
group, keep it in a row buffer and sum g^2; the lanes are combined by a pairwise tree (as the warp shuffle sum),
giving the group's rstd; then y = g * rstd * weight is written in bf16."""
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-5
NGROUPS = 8  # Mamba-2 2.7B with ngroups 8: not inferable from the input shapes
LANES = 32   # the GPU solutions' threads per group (one warp)
LOG_LANES = 5
_compiled = {}


def _build(tokens: int, d_inner: int):
    gsize = d_inner // NGROUPS
    per_lane = gsize // LANES

    @T.prim_func
    def gated_group_rmsnorm(x_ptr: T.handle, z_ptr: T.handle, w_ptr: T.handle, y_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, d_inner), "bfloat16")
        Z = T.match_buffer(z_ptr, (tokens, d_inner), "bfloat16")
        W = T.match_buffer(w_ptr, (d_inner,), "bfloat16")
        Y = T.match_buffer(y_ptr, (tokens, d_inner), "bfloat16")
        g = T.alloc_buffer((gsize,), "float32")
        lanes = T.alloc_buffer((LANES,), "float32")
        for i in T.serial(tokens):
            for grp in T.serial(NGROUPS):
                for l in T.serial(LANES):
                    lanes[l] = T.float32(0)
                for k in T.serial(per_lane):
                    for l in T.serial(LANES):
                        c = k * LANES + l
                        zv = T.Cast("float32", Z[i, grp * gsize + c])
                        g[c] = T.Cast("float32", X[i, grp * gsize + c]) * zv / (T.float32(1) + T.exp(-zv))
                        lanes[l] = lanes[l] + g[c] * g[c]
                for s in T.serial(LOG_LANES):
                    for l in T.serial(T.shift_right(LANES // 2, s)):
                        lanes[l] = lanes[l] + lanes[l + T.shift_right(LANES // 2, s)]
                for c in T.serial(gsize):
                    rstd = T.rsqrt(lanes[0] / T.float32(gsize) + T.float32(EPS))
                    Y[i, grp * gsize + c] = T.Cast("bfloat16", g[c] * rstd * T.Cast("float32", W[grp * gsize + c]))

    return tvm.compile(tvm.IRModule({"main": gated_group_rmsnorm}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor, z: torch.Tensor, weight: torch.Tensor):
    tokens, d_inner = x.shape
    if x.dtype != torch.bfloat16 or z.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 x, z and weight")
    if z.shape != x.shape or tuple(weight.shape) != (d_inner,):
        raise ValueError("z must match x and weight must be (D_INNER,)")
    if d_inner % (NGROUPS * LANES) != 0:
        raise ValueError(f"D_INNER={d_inner} must be a multiple of NGROUPS * {LANES} = {NGROUPS * LANES}")
    key = (tokens, d_inner)
    if key not in _compiled:
        _compiled[key] = _build(tokens, d_inner)
    y = torch.empty_like(x)
    _compiled[key](x.contiguous(), z.contiguous(), weight.contiguous(), y)
    return y
