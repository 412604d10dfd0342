"""CPU-target (LLVM) TIRx solution: per token row, pass 1 sums x and x^2 in float64 (exact for bf16 inputs), so
mean and rstd, each rounded once to float32, are as exact as the amax output's tight bound needs; pass 2 computes
y = (x - mean) * rstd * weight + bias in float32, folds |y| into the running amax and writes
q = e4m3fn(clamp(y * scale, -448, 448)), rounded to nearest even in integer arithmetic: subnormal codes are
round(|v| * 512), normal ones (exponent + 7) * 8 + round((mantissa - 1) * 8), a mantissa carry stepping into the
next exponent. Last, the history is shifted by one with the amax in front. The kernel writes uint8 bits that solve() views as float8_e4m3fn."""
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-5
FP8_MAX = 448.0
_compiled = {}


def _build(tokens: int, hidden: int, history: int):
    @T.prim_func
    def layernorm_fp8(x_ptr: T.handle, w_ptr: T.handle, b_ptr: T.handle, s_ptr: T.handle, h_ptr: T.handle,
                      q_ptr: T.handle, n_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        W = T.match_buffer(w_ptr, (hidden,), "bfloat16")
        B = T.match_buffer(b_ptr, (hidden,), "bfloat16")
        S = T.match_buffer(s_ptr, (1,), "float32")
        Q = T.match_buffer(q_ptr, (tokens, hidden), "uint8")
        HIST = T.match_buffer(h_ptr, (history,), "float32")
        NEW = T.match_buffer(n_ptr, (history,), "float32")
        sums = T.alloc_buffer((2,), "float64")  # 0: sum x, 1: sum x^2
        stat = T.alloc_buffer((2,), "float32")  # 0: mean, 1: rstd
        amax = T.alloc_buffer((1,), "float32")
        v = T.alloc_buffer((1,), "float32")
        a = T.alloc_buffer((1,), "float32")
        code = T.alloc_buffer((1,), "int32")
        amax[0] = T.float32(0)
        for i in T.serial(tokens):
            sums[0] = T.float64(0)
            sums[1] = T.float64(0)
            for j in T.serial(hidden):
                sums[0] = sums[0] + T.Cast("float64", X[i, j])
                sums[1] = sums[1] + T.Cast("float64", X[i, j]) * T.Cast("float64", X[i, j])
            mean64 = sums[0] / T.float64(hidden)
            stat[0] = T.Cast("float32", mean64)
            stat[1] = T.Cast("float32", T.float64(1) / T.sqrt(
                T.max(sums[1] / T.float64(hidden) - mean64 * mean64, T.float64(0)) + T.float64(EPS)))
            for j in T.serial(hidden):
                y = (T.Cast("float32", X[i, j]) - stat[0]) * stat[1] * T.Cast("float32", W[j]) + T.Cast("float32", B[j])
                amax[0] = T.max(amax[0], T.abs(y))
                v[0] = T.min(T.max(y * S[0], T.float32(-FP8_MAX)), T.float32(FP8_MAX))
                a[0] = T.abs(v[0])
                if a[0] < T.float32(0.015625):  # below 2^-6: subnormal codes, steps of 2^-9 (code 8 is 2^-6)
                    code[0] = T.Cast("int32", T.nearbyint(a[0] * T.float32(512)))
                else:
                    bits = T.reinterpret("int32", a[0])
                    mant = T.reinterpret("float32", T.bitwise_or(T.bitwise_and(bits, 0x7FFFFF), 0x3F800000))
                    code[0] = (T.shift_right(bits, 23) - 127 + 7) * 8 + T.Cast(
                        "int32", T.nearbyint((mant - T.float32(1)) * T.float32(8)))
                Q[i, j] = T.Cast("uint8", T.Select(v[0] < T.float32(0), T.bitwise_or(code[0], 128), code[0]))
        NEW[0] = amax[0]
        for k in T.serial(history - 1):
            NEW[k + 1] = HIST[k]

    return tvm.compile(tvm.IRModule({"main": layernorm_fp8}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, scale: torch.Tensor,
          amax_history: torch.Tensor):
    tokens, hidden = x.shape
    history = amax_history.shape[0]
    if x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16 or bias.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 x, weight and bias")
    if scale.dtype != torch.float32 or scale.numel() != 1:
        raise ValueError("scale must be a single float32 value")
    if amax_history.dtype != torch.float32 or amax_history.dim() != 1 or history < 2:
        raise ValueError("amax_history must be a float32 vector of at least 2 entries")
    if tuple(weight.shape) != (hidden,) or tuple(bias.shape) != (hidden,):
        raise ValueError("weight and bias must be (HIDDEN,)")
    key = (tokens, hidden, history)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    q = torch.empty((tokens, hidden), dtype=torch.uint8, device=x.device)
    new_history = torch.empty_like(amax_history)
    _compiled[key](x.contiguous(), weight.contiguous(), bias.contiguous(), scale.reshape(1).contiguous(),
                   amax_history.contiguous(), q, new_history)
    return q.view(torch.float8_e4m3fn), new_history
