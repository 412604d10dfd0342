"""CPU-target (LLVM) TIRx solution: per (token, group of 128), a serial amax pass, then x / scale rounded to
fp8 e4m3fn bits in integer arithmetic (round to nearest even, exact match of torch's cast for |y| <= 448); the
kernel writes uint8 bits that solve() views as float8_e4m3fn."""
import torch
import tvm
from tvm.script import tirx as T

GROUP = 128
FP8_MAX = 448.0
AMAX_FLOOR = 1e-4
_compiled = {}


def _build(tokens: int, hidden: int):
    groups = hidden // GROUP

    @T.prim_func
    def per_group_fp8_quant(x_ptr: T.handle, q_ptr: T.handle, s_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        Q = T.match_buffer(q_ptr, (tokens, hidden), "uint8")
        S = T.match_buffer(s_ptr, (tokens, groups), "float32")
        # scalar temporaries live in buffers allocated once (per-iteration scalars are slow on the LLVM target)
        amax = T.alloc_buffer((1,), "float32")
        scale = T.alloc_buffer((1,), "float32")
        y = T.alloc_buffer((1,), "float32")
        u = T.alloc_buffer((1,), "int32")
        ex = T.alloc_buffer((1,), "int32")
        e = T.alloc_buffer((1,), "int32")
        mant = T.alloc_buffer((1,), "int32")
        sh = T.alloc_buffer((1,), "int32")
        qv = T.alloc_buffer((1,), "int32")
        rem = T.alloc_buffer((1,), "int32")
        code = T.alloc_buffer((1,), "int32")
        for i in T.serial(tokens):
            for g in T.serial(groups):
                amax[0] = T.float32(0)
                for j in T.serial(GROUP):
                    amax[0] = T.max(amax[0], T.abs(T.Cast("float32", X[i, g * GROUP + j])))
                scale[0] = T.max(amax[0], T.float32(AMAX_FLOOR)) / T.float32(FP8_MAX)
                S[i, g] = scale[0]
                for j in T.serial(GROUP):
                    y[0] = T.min(T.max(T.Cast("float32", X[i, g * GROUP + j]) / scale[0], T.float32(-FP8_MAX)),
                                 T.float32(FP8_MAX))
                    # float32 -> e4m3fn bits, round to nearest even (|y| <= 448, so no overflow to NaN)
                    u[0] = T.reinterpret("int32", y[0])
                    # unbiased float32 exponent
                    ex[0] = T.shift_right(T.bitwise_and(u[0], 0x7FFFFFFF), 23) - 127
                    e[0] = T.max(ex[0], -6)  # e4m3 exponent (-6: subnormal range)
                    mant[0] = T.bitwise_or(T.bitwise_and(u[0], 0x7FFFFF), 0x800000)  # 24-bit significand
                    sh[0] = T.min(20 + e[0] - ex[0], 25)  # keep 3 mantissa bits (fewer if subnormal)
                    qv[0] = T.shift_right(mant[0], sh[0])
                    rem[0] = T.bitwise_and(mant[0], T.shift_left(1, sh[0]) - 1)
                    code[0] = 8 * (e[0] + 6) + qv[0] + T.Select(  # a mantissa carry bumps the exponent
                        T.Or(rem[0] > T.shift_left(1, sh[0] - 1),
                             T.And(rem[0] == T.shift_left(1, sh[0] - 1), T.bitwise_and(qv[0], 1) == 1)), 1, 0)
                    Q[i, g * GROUP + j] = T.Cast("uint8", T.Select(u[0] < 0, T.bitwise_or(code[0], 128), code[0]))

    module = tvm.IRModule({"main": per_group_fp8_quant})
    return tvm.compile(module, target="llvm", tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor):
    tokens, hidden = x.shape
    if hidden % GROUP != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {GROUP}")
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = _build(tokens, hidden)
    q = torch.empty((tokens, hidden), dtype=torch.uint8)
    scale = torch.empty((tokens, hidden // GROUP), dtype=torch.float32)
    _compiled[key](x, q, scale)
    return q.view(torch.float8_e4m3fn), scale
