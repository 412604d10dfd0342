"""CPU-target (LLVM) TIRx solution, the GPU solutions' algorithm run serially. First rstd per token (the sum of x^2
over 256 strided lanes, as the GPU's threads, then the lanes). Then the GEMM by 64 x 64 tiles of dW: for each chunk
of 16 tokens the dy tile is staged as fp32 and the y tile is rebuilt as bf16(x * rstd * gamma) on the fly (rounded by integer arithmetic on the bits) (never
stored whole), and the 64 x 64 fp32 accumulators take the chunk's 16 rank-1 updates; the tile is then written."""
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-5
LANES = 256
BO = 64   # dW rows (q_proj outputs) per tile
BI = 64   # dW columns (hidden channels) per tile
BT = 16   # tokens per staged chunk
_compiled = {}


def _round_bf16(v):
    """fp32 -> the nearest bf16 value (ties to even), kept in fp32: integer rounding of the bit pattern (a cast to
    bfloat16 and back is folded away by the compiler, which would skip the rounding)."""
    bits = T.reinterpret("int32", v)
    bits = bits + 0x7FFF + T.bitwise_and(T.shift_right(bits, 16), 1)
    return T.reinterpret("float32", T.bitwise_and(bits, T.int32(-65536)))


def _build(tokens: int, hidden: int, q_dim: int):
    iters = hidden // LANES

    @T.prim_func
    def dweight(x_ptr: T.handle, g_ptr: T.handle, dy_ptr: T.handle, w_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        G = T.match_buffer(g_ptr, (hidden,), "bfloat16")
        DY = T.match_buffer(dy_ptr, (tokens, q_dim), "bfloat16")
        DW = T.match_buffer(w_ptr, (q_dim, hidden), "float32")
        rstd = T.alloc_buffer((tokens,), "float32")
        lanes = T.alloc_buffer((LANES,), "float32")
        tot = T.alloc_buffer((1,), "float32")
        s_dy = T.alloc_buffer((BT, BO), "float32")
        s_y = T.alloc_buffer((BT, BI), "float32")
        acc = T.alloc_buffer((BO, BI), "float32")
        for t in T.serial(tokens):
            for l in T.serial(LANES):
                lanes[l] = T.float32(0)
            for k in T.serial(iters):
                for l in T.serial(LANES):
                    xv = T.Cast("float32", X[t, k * LANES + l])
                    lanes[l] = lanes[l] + xv * xv
            tot[0] = T.float32(0)
            for l in T.serial(LANES):
                tot[0] = tot[0] + lanes[l]
            rstd[t] = T.rsqrt(tot[0] / T.float32(hidden) + T.float32(EPS))
        for ob in T.serial(q_dim // BO):
            for ib in T.serial(hidden // BI):
                for a in T.serial(BO):
                    for b in T.serial(BI):
                        acc[a, b] = T.float32(0)
                for tc in T.serial(tokens // BT):
                    for t in T.serial(BT):
                        for c in T.serial(BO):
                            s_dy[t, c] = T.Cast("float32", DY[tc * BT + t, ob * BO + c])
                        for c in T.serial(BI):
                            s_y[t, c] = _round_bf16(T.Cast("float32", X[tc * BT + t, ib * BI + c]) * rstd[tc * BT + t]
                                                    * T.Cast("float32", G[ib * BI + c]))
                    for t in T.serial(BT):
                        for a in T.serial(BO):
                            for b in T.serial(BI):
                                acc[a, b] = acc[a, b] + s_dy[t, a] * s_y[t, b]
                for a in T.serial(BO):
                    for b in T.serial(BI):
                        DW[ob * BO + a, ib * BI + b] = acc[a, b]

    return tvm.compile(tvm.IRModule({"main": dweight}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor, gamma: torch.Tensor, dy: torch.Tensor):
    tokens, hidden = x.shape
    q_dim = dy.shape[1]
    if x.dtype != torch.bfloat16 or gamma.dtype != torch.bfloat16 or dy.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 x, gamma and dy")
    if tuple(gamma.shape) != (hidden,) or dy.shape[0] != tokens:
        raise ValueError("gamma must be (HIDDEN,) and dy (TOKENS, Q_DIM)")
    if hidden % LANES != 0 or hidden % BI != 0 or q_dim % BO != 0 or tokens % BT != 0:
        raise ValueError(f"HIDDEN must be a multiple of {LANES}, Q_DIM of {BO} and TOKENS of {BT}")
    key = (tokens, hidden, q_dim)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    dw = torch.empty(q_dim, hidden, dtype=torch.float32, device=x.device)
    _compiled[key](x.contiguous(), gamma.contiguous(), dy.contiguous(), dw)
    return dw
