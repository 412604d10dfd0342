"""GPU (sm_90a) TIRx solution: one thread per element, one warp per 32-wide MX block, CTAs of 256 threads (8 blocks)
over (HIDDEN / 256, TOKENS). The block's absmax is a warp max-reduction; the e8m0 exponent e = ceil(log2(amax/448))
is read off amax's float32 bits without a division (448 = 1.75 * 2^8: biased exponent - 135, plus one when the
mantissa field exceeds 1.75's 0x600000; clamped at -127, which an all-zero block gets) and lane 0 stores e + 127.
Each lane multiplies by 2^-e (exact, built in the exponent field) and encodes e4m3fn bits with round to nearest
even: normals by adding the RNE bias to the float32 bits and dropping 20 mantissa bits, subnormals (|y| < 2^-6) as
rint(|y| * 512)."""
import torch
import tvm
from tvm.script import tirx as T

BLOCK = 32
FP8_MAX = 448.0
THREADS = 256
_compiled = {}


def _build(tokens: int, hidden: int):
    nblk = hidden // BLOCK

    @T.prim_func
    def mxfp8_quant(x_ptr: T.handle, q_ptr: T.handle, s_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        Q = T.match_buffer(q_ptr, (tokens, hidden), "uint8")
        S = T.match_buffer(s_ptr, (tokens, nblk), "uint8")
        T.device_entry()
        cb, row = T.cta_id([hidden // THREADS, tokens])
        tx = T.thread_id([THREADS])
        col = cb * THREADS + tx
        xv = T.Cast("float32", X[row, col])
        amax = T.cuda.warp_max(T.abs(xv))
        # amax = 1.f * 2^(E - 127) and 448 = 1.75 * 2^8: ceil(log2(amax / 448)) = E - 135, plus one when the
        # significand 1.f exceeds 1.75 (mantissa field above 0x600000); clamped to e8m0's -127. No division.
        rb = T.reinterpret("int32", amax)
        e = T.max(T.shift_right(rb, 23) - 135 + T.Select(T.bitwise_and(rb, 0x7FFFFF) > 0x600000, 1, 0), -127)
        if tx % 32 == 0:
            S[row, col // BLOCK] = T.Cast("uint8", e + 127)
        inv = T.reinterpret("float32", T.shift_left(127 - e, 23))       # 2^-e, exact
        y = T.min(T.max(xv * inv, T.float32(-FP8_MAX)), T.float32(FP8_MAX))
        u = T.reinterpret("int32", y)
        a = T.bitwise_and(u, 0x7FFFFFFF)
        code = T.Select(a < 0x3C800000,                                     # |y| < 2^-6: e4m3 subnormal
                        T.Cast("int32", T.nearbyint(T.abs(y) * T.float32(512))),
                        T.shift_right(a + 0x7FFFF + T.bitwise_and(T.shift_right(a, 20), 1), 20) - 960)
        Q[row, col] = T.Cast("uint8", T.Select(u < 0, T.bitwise_or(code, 128), code))

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": mxfp8_quant}), target=target, tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor):
    tokens, hidden = x.shape
    if x.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 x")
    if hidden % THREADS != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {THREADS} (8 MX blocks of {BLOCK} per CTA)")
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    q = torch.empty((tokens, hidden), dtype=torch.uint8, device=x.device)
    scales = torch.empty((tokens, hidden // BLOCK), dtype=torch.uint8, device=x.device)
    _compiled[key](x.contiguous(), q, scales)
    return q.view(torch.float8_e4m3fn), scales
