"""CPU-target (LLVM) TIRx solution: per sequence b (bounds from cu_seqlens) the state vector starts at h0[b] and
walks the sequence's tokens in order; per token one pass over the channels computes the lower-bounded gate
f = lb + (1 - lb) * sigmoid(f_logit) (sigmoid in float64), h <- f h + (1 - f) x and writes h. The final state is
the vector left after the last token. Scalars live in small buffers allocated once: a scalar bound inside a loop
becomes a workspace allocation per iteration on the LLVM target."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(total: int, batch: int, dim: int):
    @T.prim_func
    def hgrn_scan(x_ptr: T.handle, f_ptr: T.handle, lb_ptr: T.handle, h0_ptr: T.handle, cu_ptr: T.handle,
                  y_ptr: T.handle, hn_ptr: T.handle):
        X = T.match_buffer(x_ptr, (total, dim), "bfloat16")
        F = T.match_buffer(f_ptr, (total, dim), "bfloat16")
        LB = T.match_buffer(lb_ptr, (dim,), "float32")
        H0 = T.match_buffer(h0_ptr, (batch, dim), "float32")
        CU = T.match_buffer(cu_ptr, (batch + 1,), "int32")
        Y = T.match_buffer(y_ptr, (total, dim), "bfloat16")
        HN = T.match_buffer(hn_ptr, (batch, dim), "float32")
        h = T.alloc_buffer((dim,), "float32")
        f = T.alloc_buffer((1,), "float32")
        for b in T.serial(batch):
            for d in T.serial(dim):
                h[d] = H0[b, d]
            for t in T.serial(CU[b + 1] - CU[b]):
                for d in T.serial(dim):
                    f[0] = LB[d] + (T.float32(1) - LB[d]) * T.Cast(
                        "float32", T.float64(1) / (T.float64(1) + T.exp(-T.Cast("float64", F[CU[b] + t, d]))))
                    h[d] = f[0] * h[d] + (T.float32(1) - f[0]) * T.Cast("float32", X[CU[b] + t, d])
                    Y[CU[b] + t, d] = T.Cast("bfloat16", h[d])
            for d in T.serial(dim):
                HN[b, d] = h[d]

    module = tvm.IRModule({"main": hgrn_scan})
    return tvm.compile(module, target="llvm", tir_pipeline="tirx")["main"]


def solve(x, f_logit, lower_bound, h0, cu_seqlens):
    total, dim = x.shape
    batch = h0.shape[0]
    if x.dtype != torch.bfloat16 or f_logit.dtype != torch.bfloat16 or tuple(f_logit.shape) != (total, dim):
        raise ValueError("x and f_logit must be bfloat16 (TOTAL_TOKENS, DIM)")
    if lower_bound.dtype != torch.float32 or h0.dtype != torch.float32 or tuple(h0.shape) != (batch, dim):
        raise ValueError("lower_bound (DIM,) and h0 (BATCH, DIM) must be float32")
    if cu_seqlens.dtype != torch.int32 or tuple(cu_seqlens.shape) != (batch + 1,):
        raise ValueError("cu_seqlens must be int32 (BATCH + 1,)")
    key = (total, batch, dim)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    y = torch.empty((total, dim), dtype=x.dtype)
    hn = torch.empty((batch, dim), dtype=torch.float32)
    _compiled[key](x.contiguous(), f_logit.contiguous(), lower_bound.contiguous(), h0.contiguous(),
                   cu_seqlens.contiguous(), y, hn)
    return y, hn
