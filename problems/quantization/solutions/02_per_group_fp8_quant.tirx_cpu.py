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
        amax = T.alloc_buffer((1,), "float32")
        for i in T.serial(tokens):
            for g in T.serial(groups):
                amax[0] = T.float32(0)
                for j in T.serial(GROUP):
                    amax[0] = T.max(amax[0], T.abs(T.Cast("float32", X[i, g * GROUP + j])))
                scale = T.bind(T.max(amax[0], T.float32(AMAX_FLOOR)) / T.float32(FP8_MAX))
                S[i, g] = scale
                for j in T.serial(GROUP):
                    y = T.bind(T.min(T.max(T.Cast("float32", X[i, g * GROUP + j]) / scale, T.float32(-FP8_MAX)),
                                   T.float32(FP8_MAX)))
                    # float32 -> e4m3fn bits, round to nearest even (|y| <= 448, so no overflow to NaN)
                    u = T.bind(T.reinterpret("int32", y))
                    a = T.bind(T.bitwise_and(u, 0x7FFFFFFF))
                    ex = T.bind(T.shift_right(a, 23) - 127)             # unbiased float32 exponent
                    e = T.bind(T.max(ex, -6))                           # e4m3 exponent (-6: subnormal range)
                    mant = T.bind(T.bitwise_or(T.bitwise_and(a, 0x7FFFFF), 0x800000))
                    sh = T.bind(T.min(20 + e - ex, 25))                 # keep 3 mantissa bits (fewer if subnormal)
                    qv = T.bind(T.shift_right(mant, sh))
                    rem = T.bind(T.bitwise_and(mant, T.shift_left(1, sh) - 1))
                    half = T.bind(T.shift_left(1, sh - 1))
                    up = T.bind(T.Select(T.Or(rem > half, T.And(rem == half, T.bitwise_and(qv, 1) == 1)), 1, 0))
                    code = T.bind(8 * (e + 6) + qv + up)                # mantissa carry bumps the exponent
                    Q[i, g * GROUP + j] = T.Cast("uint8", T.Select(u < 0, T.bitwise_or(code, 128), code))

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
