"""CPU-target (LLVM) TIRx solution: serial loops over (token, head): fp32 weights exp(lse - max) / (sum) from the
two log-sum-exps, the merged output row, and the merged log-sum-exp."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(tokens: int, heads: int, head_size: int):
    @T.prim_func
    def merge_attn_states(po_ptr: T.handle, pl_ptr: T.handle, so_ptr: T.handle, sl_ptr: T.handle,
                          o_ptr: T.handle, ol_ptr: T.handle):
        PO = T.match_buffer(po_ptr, (tokens, heads, head_size), "bfloat16")
        PL = T.match_buffer(pl_ptr, (heads, tokens), "float32")
        SO = T.match_buffer(so_ptr, (tokens, heads, head_size), "bfloat16")
        SL = T.match_buffer(sl_ptr, (heads, tokens), "float32")
        O = T.match_buffer(o_ptr, (tokens, heads, head_size), "bfloat16")
        OL = T.match_buffer(ol_ptr, (heads, tokens), "float32")
        w = T.alloc_buffer((4,), "float32")  # 0: max lse, 1: prefix weight, 2: suffix weight, 3: sum of exps
        for t in T.serial(tokens):
            for h in T.serial(heads):
                w[0] = T.max(PL[h, t], SL[h, t])
                w[1] = T.exp(PL[h, t] - w[0])
                w[2] = T.exp(SL[h, t] - w[0])
                w[3] = w[1] + w[2]
                OL[h, t] = T.log(w[3]) + w[0]
                for d in T.serial(head_size):
                    O[t, h, d] = T.Cast("bfloat16", T.Cast("float32", PO[t, h, d]) * (w[1] / w[3])
                                        + T.Cast("float32", SO[t, h, d]) * (w[2] / w[3]))

    return tvm.compile(tvm.IRModule({"main": merge_attn_states}), target="llvm", tir_pipeline="tirx")["main"]


def solve(prefix_output: torch.Tensor, prefix_lse: torch.Tensor, suffix_output: torch.Tensor,
          suffix_lse: torch.Tensor):
    tokens, heads, head_size = prefix_output.shape
    if tuple(prefix_lse.shape) != (heads, tokens) or suffix_lse.shape != prefix_lse.shape \
            or suffix_output.shape != prefix_output.shape:
        raise ValueError("shape mismatch")
    key = (tokens, heads, head_size)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    prefix_output = prefix_output.contiguous()
    suffix_output = suffix_output.contiguous()
    prefix_lse = prefix_lse.contiguous()
    suffix_lse = suffix_lse.contiguous()
    out = torch.empty_like(prefix_output)
    out_lse = torch.empty_like(prefix_lse)
    _compiled[key](prefix_output, prefix_lse, suffix_output, suffix_lse, out, out_lse)
    return out, out_lse
