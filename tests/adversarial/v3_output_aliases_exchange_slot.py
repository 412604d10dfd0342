# mkb-adversarial: dsl=tirx device=cpu expect=output_type
# problem: mlp_norm/02_silu_and_mul
# hack: finds the harness's output slot through the input's storage (every input is a view of the one exchange buffer; the output slot follows the inputs of its bank) and computes the answer straight into it, so the copy of returned outputs into their slots — timed for every kernel and taken off as the no-op's cost — is never paid
# must be rejected because: solve is never handed an output slot, so a returned tensor sharing memory with one is the harness's own buffer reached behind its back (output_type)
import torch
import tvm
from tvm.script import tirx as T

ALIGN = 256
_compiled = {}


def _build(tokens: int, d: int):
    @T.prim_func
    def silu_and_mul(x_ptr: T.handle, o_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, 2 * d), "bfloat16")
        O = T.match_buffer(o_ptr, (tokens, d), "bfloat16")
        for i in T.serial(tokens):
            for j in T.serial(d):
                g = T.Cast("float32", X[i, j])
                O[i, j] = T.Cast("bfloat16", g / (T.float32(1) + T.exp(T.float32(0) - g)) * T.Cast("float32", X[i, d + j]))

    return tvm.compile(tvm.IRModule({"main": silu_and_mul}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor):
    tokens, two_d = x.shape
    d = two_d // 2
    if (tokens, d) not in _compiled:
        _compiled[(tokens, d)] = _build(tokens, d)
    end = (x.storage_offset() + x.numel()) * x.element_size()
    slot = (end + ALIGN - 1) // ALIGN * ALIGN
    out = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), slot // x.element_size(), (tokens, d), (d, 1))
    _compiled[(tokens, d)](x, out)
    return out
