"""CPU-target (LLVM) TIRx solution: three serial passes per row in fp32 — the mean, then the sum of squared
deviations from it (two-pass variance), then (x - mean) * rstd * weight + bias rounded once to bf16."""
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-5
_compiled = {}


def _build(tokens: int, hidden: int):
    @T.prim_func
    def layernorm(x_ptr: T.handle, w_ptr: T.handle, b_ptr: T.handle, y_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        W = T.match_buffer(w_ptr, (hidden,), "bfloat16")
        B = T.match_buffer(b_ptr, (hidden,), "bfloat16")
        Y = T.match_buffer(y_ptr, (tokens, hidden), "bfloat16")
        stat = T.alloc_buffer((3,), "float32")  # 0: sum, 1: mean, 2: sum of squared deviations
        for i in T.serial(tokens):
            stat[0] = T.float32(0)
            for j in T.serial(hidden):
                stat[0] = stat[0] + T.Cast("float32", X[i, j])
            stat[1] = stat[0] / T.float32(hidden)
            stat[2] = T.float32(0)
            for j in T.serial(hidden):
                d = T.Cast("float32", X[i, j]) - stat[1]
                stat[2] = stat[2] + d * d
            for j in T.serial(hidden):
                rstd = T.rsqrt(stat[2] / T.float32(hidden) + T.float32(EPS))
                y = (T.Cast("float32", X[i, j]) - stat[1]) * rstd * T.Cast("float32", W[j]) + T.Cast("float32", B[j])
                Y[i, j] = T.Cast("bfloat16", y)

    return tvm.compile(tvm.IRModule({"main": layernorm}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
    tokens, hidden = x.shape
    if x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16 or bias.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 x, weight and bias")
    if weight.shape != (hidden,) or bias.shape != (hidden,):
        raise ValueError(f"weight and bias must have shape ({hidden},)")
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = _build(tokens, hidden)
    x = x.contiguous()
    out = torch.empty_like(x)
    _compiled[key](x, weight.contiguous(), bias.contiguous(), out)
    return out
