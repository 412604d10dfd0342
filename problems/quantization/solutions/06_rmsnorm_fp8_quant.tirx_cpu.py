"""CPU-target (LLVM) TIRx solution: per token row, pass 1 sums x^2 in float64 (so rstd, rounded once to float32, is
as exact as the scale output's tight bound needs), pass 2 writes y = x * rstd * weight
(float32) to a row buffer and takes its amax, pass 3 divides by scale = max(amax, 1e-4) / 448 and rounds to fp8
e4m3fn bits in integer arithmetic (round to nearest even, exact match of torch's cast for |y| <= 448). The kernel
writes uint8 bits that solve() views as float8_e4m3fn."""
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-5
FP8_MAX = 448.0
AMAX_FLOOR = 1e-4
_compiled = {}


def _build(tokens: int, hidden: int):
    @T.prim_func
    def rmsnorm_fp8_quant(x_ptr: T.handle, w_ptr: T.handle, q_ptr: T.handle, s_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        W = T.match_buffer(w_ptr, (hidden,), "bfloat16")
        Q = T.match_buffer(q_ptr, (tokens, hidden), "uint8")
        S = T.match_buffer(s_ptr, (tokens, 1), "float32")
        y = T.alloc_buffer((hidden,), "float32")
        ssq = T.alloc_buffer((1,), "float64")
        rstd = T.alloc_buffer((1,), "float32")
        amax = T.alloc_buffer((1,), "float32")
        scale = T.alloc_buffer((1,), "float32")
        # scalar temporaries of the fp8 rounding live in buffers allocated once
        v = T.alloc_buffer((1,), "float32")
        u = T.alloc_buffer((1,), "int32")
        ex = T.alloc_buffer((1,), "int32")
        e = T.alloc_buffer((1,), "int32")
        mant = T.alloc_buffer((1,), "int32")
        sh = T.alloc_buffer((1,), "int32")
        qv = T.alloc_buffer((1,), "int32")
        rem = T.alloc_buffer((1,), "int32")
        code = T.alloc_buffer((1,), "int32")
        for i in T.serial(tokens):
            ssq[0] = T.float64(0)
            for j in T.serial(hidden):
                ssq[0] = ssq[0] + T.Cast("float64", X[i, j]) * T.Cast("float64", X[i, j])
            rstd[0] = T.Cast("float32", T.float64(1) / T.sqrt(ssq[0] / T.float64(hidden) + T.float64(EPS)))
            amax[0] = T.float32(0)
            for j in T.serial(hidden):
                y[j] = T.Cast("float32", X[i, j]) * rstd[0] * T.Cast("float32", W[j])
                amax[0] = T.max(amax[0], T.abs(y[j]))
            scale[0] = T.max(amax[0], T.float32(AMAX_FLOOR)) / T.float32(FP8_MAX)
            S[i, 0] = scale[0]
            for j in T.serial(hidden):
                v[0] = T.min(T.max(y[j] / scale[0], T.float32(-FP8_MAX)), T.float32(FP8_MAX))
                # float32 -> e4m3fn bits, round to nearest even (|v| <= 448: no overflow to NaN)
                u[0] = T.reinterpret("int32", v[0])
                ex[0] = T.shift_right(T.bitwise_and(u[0], 0x7FFFFFFF), 23) - 127  # unbiased float32 exponent
                e[0] = T.max(ex[0], -6)  # e4m3 exponent (-6: the subnormal range)
                mant[0] = T.bitwise_or(T.bitwise_and(u[0], 0x7FFFFF), 0x800000)  # 24-bit significand
                sh[0] = T.min(20 + e[0] - ex[0], 25)  # drop all but 3 mantissa bits (more when subnormal)
                qv[0] = T.shift_right(mant[0], sh[0])
                rem[0] = T.bitwise_and(mant[0], T.shift_left(1, sh[0]) - 1)
                code[0] = 8 * (e[0] + 6) + qv[0] + T.Select(  # a carry out of the mantissa bumps the exponent
                    T.Or(rem[0] > T.shift_left(1, sh[0] - 1),
                         T.And(rem[0] == T.shift_left(1, sh[0] - 1), T.bitwise_and(qv[0], 1) == 1)), 1, 0)
                Q[i, j] = T.Cast("uint8", T.Select(u[0] < 0, T.bitwise_or(code[0], 128), code[0]))

    module = tvm.IRModule({"main": rmsnorm_fp8_quant})
    return tvm.compile(module, target="llvm", tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor, weight: torch.Tensor):
    tokens, hidden = x.shape
    if x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16 or tuple(weight.shape) != (hidden,):
        raise ValueError("expects bfloat16 x (TOKENS, HIDDEN) and weight (HIDDEN,)")
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = _build(tokens, hidden)
    q = torch.empty((tokens, hidden), dtype=torch.uint8)
    scale = torch.empty((tokens, 1), dtype=torch.float32)
    _compiled[key](x.contiguous(), weight.contiguous(), q, scale)
    return q.view(torch.float8_e4m3fn), scale
