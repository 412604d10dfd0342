"""CPU-target (LLVM) TIRx solution, the GPU solutions' algorithm run serially. Per row, with xhat = (x - mean) *
rstd from the saved statistics and g = dy * weight: one pass sums g and g * xhat into 256 strided lanes (the GPU's
threads) combined by a pairwise tree (fp32), and a second pass writes dx = rstd * (g - mean(g) - xhat *
mean(g * xhat)). dweight and dbias are reduced over tokens in two stages with fp64 accumulation of the fp32 terms
dy * xhat and dy (a long fp32 sum drifts past the fp32 tolerance): per chunk of 64 tokens, then over chunks,
rounded once to fp32."""
import torch
import tvm
from tvm.script import tirx as T

TOKEN_CHUNK = 64
LANES = 256  # the GPU solutions' threads per row
LOG_LANES = 8
_compiled = {}


def _build(tokens: int, hidden: int):
    chunks = (tokens + TOKEN_CHUNK - 1) // TOKEN_CHUNK
    iters = hidden // LANES

    @T.prim_func
    def layernorm_backward(dy_ptr: T.handle, x_ptr: T.handle, m_ptr: T.handle, r_ptr: T.handle, w_ptr: T.handle,
                           dx_ptr: T.handle, dw_ptr: T.handle, db_ptr: T.handle):
        DY = T.match_buffer(dy_ptr, (tokens, hidden), "bfloat16")
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        MEAN = T.match_buffer(m_ptr, (tokens,), "float32")
        RSTD = T.match_buffer(r_ptr, (tokens,), "float32")
        W = T.match_buffer(w_ptr, (hidden,), "bfloat16")
        DX = T.match_buffer(dx_ptr, (tokens, hidden), "bfloat16")
        DW = T.match_buffer(dw_ptr, (hidden,), "float32")
        DB = T.match_buffer(db_ptr, (hidden,), "float32")
        lanes = T.alloc_buffer((2, LANES), "float32")  # per-lane partial sums: 0: g, 1: g * xhat
        pw = T.alloc_buffer((chunks, hidden), "float64")
        pb = T.alloc_buffer((chunks, hidden), "float64")
        tot = T.alloc_buffer((2,), "float64")
        for i in T.serial(tokens):
            for l in T.serial(LANES):
                lanes[0, l] = T.float32(0)
                lanes[1, l] = T.float32(0)
            for k in T.serial(iters):
                for l in T.serial(LANES):
                    j = k * LANES + l
                    g = T.Cast("float32", DY[i, j]) * T.Cast("float32", W[j])
                    lanes[0, l] = lanes[0, l] + g
                    lanes[1, l] = lanes[1, l] + g * ((T.Cast("float32", X[i, j]) - MEAN[i]) * RSTD[i])
            for s in T.serial(LOG_LANES):  # pairwise tree over the lanes, as the GPU's shuffle reduction
                for l in T.serial(T.shift_right(LANES // 2, s)):
                    lanes[0, l] = lanes[0, l] + lanes[0, l + T.shift_right(LANES // 2, s)]
                    lanes[1, l] = lanes[1, l] + lanes[1, l + T.shift_right(LANES // 2, s)]
            for j in T.serial(hidden):
                g = T.Cast("float32", DY[i, j]) * T.Cast("float32", W[j])
                xhat = (T.Cast("float32", X[i, j]) - MEAN[i]) * RSTD[i]
                DX[i, j] = T.Cast("bfloat16", RSTD[i] * (g - lanes[0, 0] / T.float32(hidden)
                                                         - xhat * (lanes[1, 0] / T.float32(hidden))))
        for c in T.serial(chunks):
            for j in T.serial(hidden):
                pw[c, j] = T.float64(0)
                pb[c, j] = T.float64(0)
            for t in T.serial(TOKEN_CHUNK):
                if c * TOKEN_CHUNK + t < tokens:
                    for j in T.serial(hidden):
                        tok = c * TOKEN_CHUNK + t
                        dyv = T.Cast("float32", DY[tok, j])
                        xhat = (T.Cast("float32", X[tok, j]) - MEAN[tok]) * RSTD[tok]
                        pw[c, j] = pw[c, j] + T.Cast("float64", dyv * xhat)
                        pb[c, j] = pb[c, j] + T.Cast("float64", dyv)
        for j in T.serial(hidden):
            tot[0] = T.float64(0)
            tot[1] = T.float64(0)
            for c in T.serial(chunks):
                tot[0] = tot[0] + pw[c, j]
                tot[1] = tot[1] + pb[c, j]
            DW[j] = T.Cast("float32", tot[0])
            DB[j] = T.Cast("float32", tot[1])

    return tvm.compile(tvm.IRModule({"main": layernorm_backward}), target="llvm", tir_pipeline="tirx")["main"]


def solve(dy: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor, weight: torch.Tensor):
    tokens, hidden = x.shape
    if dy.dtype != torch.bfloat16 or x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 dy, x and weight")
    if mean.dtype != torch.float32 or rstd.dtype != torch.float32:
        raise ValueError("expects float32 mean and rstd")
    if dy.shape != x.shape or mean.shape != (tokens,) or rstd.shape != (tokens,) or weight.shape != (hidden,):
        raise ValueError("shape mismatch among dy, x, mean, rstd, weight")
    if hidden % LANES != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {LANES}")
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = _build(tokens, hidden)
    dx = torch.empty_like(x)
    dweight = torch.empty(hidden, dtype=torch.float32, device=x.device)
    dbias = torch.empty(hidden, dtype=torch.float32, device=x.device)
    _compiled[key](dy.contiguous(), x.contiguous(), mean.contiguous(), rstd.contiguous(), weight.contiguous(), dx,
                   dweight, dbias)
    return dx, dweight, dbias
