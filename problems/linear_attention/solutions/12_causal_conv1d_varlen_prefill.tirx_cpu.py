"""CPU-target (LLVM) TIRx solution: per packed token, the sequence (start, end, index b) is found by scanning
cu_seqlens; then for every channel the WIDTH taps are summed over x[t - (WIDTH-1) + w] with taps before the
sequence start reading 0, plus bias, followed by SiLU. A token among its sequence's last WIDTH-1 writes its input
into the final conv state slot (WIDTH-1) - (end - t); a sequence's first token zero-fills the slots its sequence
is too short to reach. Scalars live in small buffers allocated once: a scalar bound inside a loop becomes a
workspace allocation per iteration on the LLVM target."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(total: int, batch: int, dim: int, width: int):
    @T.prim_func
    def conv_varlen(x_ptr: T.handle, w_ptr: T.handle, b_ptr: T.handle, cu_ptr: T.handle, y_ptr: T.handle,
                    st_ptr: T.handle):
        X = T.match_buffer(x_ptr, (total, dim), "bfloat16")
        W = T.match_buffer(w_ptr, (dim, width), "bfloat16")
        BIAS = T.match_buffer(b_ptr, (dim,), "bfloat16")
        CU = T.match_buffer(cu_ptr, (batch + 1,), "int32")
        Y = T.match_buffer(y_ptr, (total, dim), "bfloat16")
        ST = T.match_buffer(st_ptr, (batch, width - 1, dim), "bfloat16")
        seq = T.alloc_buffer((3,), "int32")   # 0: sequence index, 1: start, 2: end
        acc = T.alloc_buffer((1,), "float32")
        for t in T.serial(total):
            seq[0] = 0
            for i in T.serial(batch):
                if CU[i] <= t:
                    seq[0] = i
            seq[1] = CU[seq[0]]
            seq[2] = CU[seq[0] + 1]
            for d in T.serial(dim):
                acc[0] = T.Cast("float32", BIAS[d])
                for w in T.serial(width):
                    if t - (width - 1) + w >= seq[1]:
                        acc[0] = acc[0] + T.Cast("float32", X[t - (width - 1) + w, d]) * T.Cast("float32", W[d, w])
                Y[t, d] = T.Cast("bfloat16", acc[0] / (T.float32(1) + T.exp(-acc[0])))
                if seq[2] - t <= width - 1:
                    ST[seq[0], (width - 1) - (seq[2] - t), d] = X[t, d]
                if t == seq[1]:
                    for r in T.serial(width - 1):
                        if r < (width - 1) - (seq[2] - seq[1]):
                            ST[seq[0], r, d] = T.bfloat16(0)

    module = tvm.IRModule({"main": conv_varlen})
    return tvm.compile(module, target="llvm", tir_pipeline="tirx")["main"]


def solve(x, weight, bias, cu_seqlens):
    total, dim = x.shape
    width = weight.shape[1]
    batch = cu_seqlens.shape[0] - 1
    if x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16 or bias.dtype != torch.bfloat16:
        raise ValueError("x, weight and bias must be bfloat16")
    if tuple(weight.shape) != (dim, width) or tuple(bias.shape) != (dim,) or width < 2:
        raise ValueError("weight must be (DIM, WIDTH) with WIDTH >= 2 and bias (DIM,)")
    if cu_seqlens.dtype != torch.int32:
        raise ValueError("cu_seqlens must be int32")
    key = (total, batch, dim, width)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    y = torch.empty((total, dim), dtype=x.dtype)
    states = torch.empty((batch, width - 1, dim), dtype=x.dtype)
    _compiled[key](x.contiguous(), weight.contiguous(), bias.contiguous(), cu_seqlens.contiguous(), y, states)
    return y, states
