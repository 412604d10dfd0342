"""GPU (sm_90a) TIRx solution: one CTA of 128 threads per (token, group of 128 channels), one element per thread;
CTA-wide amax, then x / scale rounded to fp8 e4m3fn bits in integer arithmetic (round to nearest even, exact match
of torch's cast for |y| <= 448). The kernel writes uint8 bits that solve() views as float8_e4m3fn."""
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
        T.device_entry()
        bid = T.cta_id([tokens * groups])
        tx = T.thread_id([GROUP])
        scratch = T.alloc_shared((GROUP // 32,), "float32")
        row = bid // groups
        g = bid % groups
        xv = T.Cast("float32", X[row, g * GROUP + tx])
        amax = T.cuda.cta_max(T.abs(xv), GROUP // 32, scratch.ptr_to([0]))
        # __fdiv_rn: IEEE division (TVM builds with --use_fast_math, where '/' is approximate)
        scale = T.call_pure_extern("float32", "__fdiv_rn", T.max(amax, T.float32(AMAX_FLOOR)), T.float32(FP8_MAX))
        if tx == 0:
            S[row, g] = scale
        xs = T.call_pure_extern("float32", "__fdiv_rn", xv, scale)
        y = T.min(T.max(xs, T.float32(-FP8_MAX)), T.float32(FP8_MAX))
        # float32 -> e4m3fn bits, round to nearest even (|y| <= 448, so no overflow to NaN)
        u = T.reinterpret("int32", y)
        a = T.bitwise_and(u, 0x7FFFFFFF)
        ex = T.shift_right(a, 23) - 127                      # unbiased float32 exponent
        e = T.max(ex, -6)                                     # e4m3 exponent (-6: subnormal range)
        mant = T.bitwise_or(T.bitwise_and(a, 0x7FFFFF), 0x800000)
        sh = T.min(20 + e - ex, 25)                           # keep 3 mantissa bits (fewer if subnormal)
        qv = T.shift_right(mant, sh)
        rem = T.bitwise_and(mant, T.shift_left(1, sh) - 1)
        half = T.shift_left(1, sh - 1)
        up = T.Select(T.Or(rem > half, T.And(rem == half, T.bitwise_and(qv, 1) == 1)), 1, 0)
        code = 8 * (e + 6) + qv + up                          # mantissa carry bumps the exponent
        Q[row, g * GROUP + tx] = T.Cast("uint8", T.Select(u < 0, T.bitwise_or(code, 128), code))

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    module = tvm.IRModule({"main": per_group_fp8_quant})
    return tvm.compile(module, target=target, tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor):
    tokens, hidden = x.shape
    if hidden % GROUP != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {GROUP}")
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = _build(tokens, hidden)
    q = torch.empty((tokens, hidden), dtype=torch.uint8, device=x.device)
    scale = torch.empty((tokens, hidden // GROUP), dtype=torch.float32, device=x.device)
    _compiled[key](x, q, scale)
    return q.view(torch.float8_e4m3fn), scale
