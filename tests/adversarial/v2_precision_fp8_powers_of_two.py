# mkb-adversarial: dsl=tirx device=cpu expect=correctness
# problem: quantization/01_per_token_fp8_quant
# hack: a real TIRx quantiser that rounds every fp8 code below the top binade to a power of two (mantissa bits dropped), ~10% mean relative error that the fp8 element-wise bound (3 x 0.125 x |anchor|) lets through
# must be rejected because: the whole-tensor metrics for low-precision outputs (relative L1, RMSE, cosine distance against the reference's own) see the cut
import torch
import tvm
from tvm.script import tirx as T

FP8_MAX = 448.0
AMAX_FLOOR = 1e-4
_compiled = {}


def _build(tokens: int, hidden: int):
    @T.prim_func
    def per_token_fp8_quant(x_ptr: T.handle, q_ptr: T.handle, s_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        Q = T.match_buffer(q_ptr, (tokens, hidden), "uint8")
        S = T.match_buffer(s_ptr, (tokens, 1), "float32")
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
            amax[0] = T.float32(0)
            for j in T.serial(hidden):
                amax[0] = T.max(amax[0], T.abs(T.Cast("float32", X[i, j])))
            scale[0] = T.max(amax[0], T.float32(AMAX_FLOOR)) / T.float32(FP8_MAX)
            S[i, 0] = scale[0]
            for j in T.serial(hidden):
                y[0] = T.min(T.max(T.Cast("float32", X[i, j]) / scale[0], T.float32(-FP8_MAX)),
                             T.float32(FP8_MAX))
                # float32 -> e4m3fn bits, round to nearest even (|y| <= 448, so no overflow to NaN)
                u[0] = T.reinterpret("int32", y[0])
                ex[0] = T.shift_right(T.bitwise_and(u[0], 0x7FFFFFFF), 23) - 127   # unbiased float32 exponent
                e[0] = T.max(ex[0], -6)  # e4m3 exponent (-6: subnormal range)
                mant[0] = T.bitwise_or(T.bitwise_and(u[0], 0x7FFFFF), 0x800000)  # 24-bit significand
                sh[0] = T.min(20 + e[0] - ex[0], 25)  # keep 3 mantissa bits (fewer if subnormal)
                qv[0] = T.shift_right(mant[0], sh[0])
                rem[0] = T.bitwise_and(mant[0], T.shift_left(1, sh[0]) - 1)
                code[0] = 8 * (e[0] + 6) + qv[0] + T.Select(  # a mantissa carry bumps the exponent
                    T.Or(rem[0] > T.shift_left(1, sh[0] - 1),
                         T.And(rem[0] == T.shift_left(1, sh[0] - 1), T.bitwise_and(qv[0], 1) == 1)), 1, 0)
                # The cut: drop the 3 mantissa bits (rounded), i.e. every code becomes a power of two — except in
                # the top binade, where rounding would reach past 448.
                code[0] = T.Select(code[0] >= 120, code[0], T.bitwise_and(code[0] + 4, 120))
                Q[i, j] = T.Cast("uint8", T.Select(u[0] < 0, T.bitwise_or(code[0], 128), code[0]))

    module = tvm.IRModule({"main": per_token_fp8_quant})
    return tvm.compile(module, target="llvm", tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor):
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    q = torch.empty(x.shape, dtype=torch.uint8)
    scale = torch.empty((x.shape[0], 1), dtype=torch.float32)
    _compiled[key](x, q, scale)
    return q.view(torch.float8_e4m3fn), scale
