"""CPU-target (LLVM) TIRx solution, the GPU solutions' algorithm run serially in fp32. Per row: one pass sums x*x
and g*x (g = dy * weight) into 256 strided lanes (the GPU's threads) combined by a pairwise tree (a plain serial
fp32 sum of squares drifts low by ~1e-6, which dweight's fp32 tolerance sees), giving rstd and
c = rstd * mean(g * x); a second pass writes
dx = rstd * (g - x * rstd * c) and keeps rstd. dweight is reduced over tokens in two stages, accumulating the fp32
products dy * x * rstd in fp64 (a long fp32 sum drifts past the fp32 tolerance): per chunk of 64 tokens,
partial[chunk, j] = sum dy * x * rstd; then dweight[j] = fp32(sum over chunks of partial[chunk, j])."""
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-5
TOKEN_CHUNK = 64
LANES = 256  # the GPU solutions' threads per row
LOG_LANES = 8
_compiled = {}


def _build(tokens: int, hidden: int):
    chunks = (tokens + TOKEN_CHUNK - 1) // TOKEN_CHUNK
    iters = hidden // LANES

    @T.prim_func
    def rmsnorm_backward(x_ptr: T.handle, w_ptr: T.handle, dy_ptr: T.handle, dx_ptr: T.handle, dw_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        W = T.match_buffer(w_ptr, (hidden,), "bfloat16")
        DY = T.match_buffer(dy_ptr, (tokens, hidden), "bfloat16")
        DX = T.match_buffer(dx_ptr, (tokens, hidden), "bfloat16")
        DW = T.match_buffer(dw_ptr, (hidden,), "float32")
        rstd = T.alloc_buffer((tokens,), "float32")
        partial = T.alloc_buffer((chunks, hidden), "float64")
        lanes = T.alloc_buffer((2, LANES), "float32")  # per-lane partial sums: 0: x*x, 1: g*x
        acc = T.alloc_buffer((1,), "float32")  # c
        total = T.alloc_buffer((1,), "float64")
        for i in T.serial(tokens):
            for l in T.serial(LANES):
                lanes[0, l] = T.float32(0)
                lanes[1, l] = T.float32(0)
            for k in T.serial(iters):
                for l in T.serial(LANES):
                    xv = T.Cast("float32", X[i, k * LANES + l])
                    lanes[0, l] = lanes[0, l] + xv * xv
                    lanes[1, l] = lanes[1, l] + T.Cast("float32", DY[i, k * LANES + l]) * T.Cast("float32", W[k * LANES + l]) * xv
            for s in T.serial(LOG_LANES):  # pairwise tree over the lanes, as the GPU's shuffle reduction
                for l in T.serial(T.shift_right(LANES // 2, s)):
                    lanes[0, l] = lanes[0, l] + lanes[0, l + T.shift_right(LANES // 2, s)]
                    lanes[1, l] = lanes[1, l] + lanes[1, l + T.shift_right(LANES // 2, s)]
            rstd[i] = T.rsqrt(lanes[0, 0] / T.float32(hidden) + T.float32(EPS))
            acc[0] = rstd[i] * lanes[1, 0] / T.float32(hidden)
            for j in T.serial(hidden):
                g = T.Cast("float32", DY[i, j]) * T.Cast("float32", W[j])
                DX[i, j] = T.Cast("bfloat16", rstd[i] * (g - T.Cast("float32", X[i, j]) * rstd[i] * acc[0]))
        for c in T.serial(chunks):
            for j in T.serial(hidden):
                partial[c, j] = T.float64(0)
            for t in T.serial(TOKEN_CHUNK):
                if c * TOKEN_CHUNK + t < tokens:
                    for j in T.serial(hidden):
                        tok = c * TOKEN_CHUNK + t
                        partial[c, j] = partial[c, j] + T.Cast(
                            "float64", T.Cast("float32", DY[tok, j]) * T.Cast("float32", X[tok, j]) * rstd[tok])
        for j in T.serial(hidden):
            total[0] = T.float64(0)
            for c in T.serial(chunks):
                total[0] = total[0] + partial[c, j]
            DW[j] = T.Cast("float32", total[0])

    return tvm.compile(tvm.IRModule({"main": rmsnorm_backward}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor, weight: torch.Tensor, dy: torch.Tensor):
    tokens, hidden = x.shape
    if x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16 or dy.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 x, weight and dy")
    if hidden % LANES != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {LANES}")
    if dy.shape != x.shape or weight.shape != (hidden,):
        raise ValueError("dy must match x and weight must have shape (hidden,)")
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = _build(tokens, hidden)
    x = x.contiguous()
    dx = torch.empty_like(x)
    dweight = torch.empty(hidden, dtype=torch.float32, device=x.device)
    _compiled[key](x, weight.contiguous(), dy.contiguous(), dx, dweight)
    return dx, dweight
