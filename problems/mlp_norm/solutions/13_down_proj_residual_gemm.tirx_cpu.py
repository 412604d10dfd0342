"""CPU-target (LLVM) TIRx solution, the GPU solutions' algorithm run serially in fp32. For every output column n
(one row of W_down): 128 strided lanes (the GPU's threads) each accumulate, for every token m, the products
h[m, k] * W[n, k] over k = lane, lane + 128, ...; the lanes' partials are summed per token and the epilogue writes
out[m, n] = bf16(residual[m, n] + sum)."""
import torch
import tvm
from tvm.script import tirx as T

LANES = 128  # the GPU solutions' threads per CTA
_compiled = {}


def _build(tokens: int, inter: int, hidden: int):
    iters = inter // LANES

    @T.prim_func
    def down_proj_residual(h_ptr: T.handle, w_ptr: T.handle, r_ptr: T.handle, o_ptr: T.handle):
        H = T.match_buffer(h_ptr, (tokens, inter), "bfloat16")
        W = T.match_buffer(w_ptr, (hidden, inter), "bfloat16")
        R = T.match_buffer(r_ptr, (tokens, hidden), "bfloat16")
        O = T.match_buffer(o_ptr, (tokens, hidden), "bfloat16")
        part = T.alloc_buffer((LANES, tokens), "float32")
        tot = T.alloc_buffer((1,), "float32")
        for n in T.serial(hidden):
            for l in T.serial(LANES):
                for m in T.serial(tokens):
                    part[l, m] = T.float32(0)
            for it in T.serial(iters):
                for l in T.serial(LANES):
                    wv = T.Cast("float32", W[n, it * LANES + l])
                    for m in T.serial(tokens):
                        part[l, m] = part[l, m] + wv * T.Cast("float32", H[m, it * LANES + l])
            for m in T.serial(tokens):
                tot[0] = T.float32(0)
                for l in T.serial(LANES):
                    tot[0] = tot[0] + part[l, m]
                O[m, n] = T.Cast("bfloat16", T.Cast("float32", R[m, n]) + tot[0])

    return tvm.compile(tvm.IRModule({"main": down_proj_residual}), target="llvm", tir_pipeline="tirx")["main"]


def solve(h: torch.Tensor, w_down: torch.Tensor, residual: torch.Tensor):
    tokens, inter = h.shape
    hidden = w_down.shape[0]
    if h.dtype != torch.bfloat16 or w_down.dtype != torch.bfloat16 or residual.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 h, w_down and residual")
    if tuple(w_down.shape) != (hidden, inter) or tuple(residual.shape) != (tokens, hidden):
        raise ValueError("w_down must be (HIDDEN, INTERMEDIATE) and residual (TOKENS, HIDDEN)")
    if inter % LANES != 0:
        raise ValueError(f"INTERMEDIATE={inter} must be a multiple of {LANES}")
    key = (tokens, inter, hidden)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    out = torch.empty_like(residual)
    _compiled[key](h.contiguous(), w_down.contiguous(), residual.contiguous(), out)
    return out
