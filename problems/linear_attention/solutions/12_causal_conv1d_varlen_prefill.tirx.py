"""GPU (sm_90a) TIRx solution: one launch over a (channel block, token) grid of 128-thread CTAs, one thread per
(token, channel). Every thread scans cu_seqlens for its token's sequence (start, end, index b), sums the WIDTH
taps over x[t - (WIDTH-1) + w] with taps before the sequence start reading 0, adds the bias and applies SiLU (reads
and writes coalesced along channels). A token among its sequence's last WIDTH-1 writes its input into the final
conv state slot (WIDTH-1) - (end - t); a sequence's first token zero-fills the slots a too-short sequence cannot
reach, so the states come out of the same launch."""
import torch
import tvm
from tvm.script import tirx as T

THREADS = 128
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
        T.device_entry()
        c, t = T.cta_id([dim // THREADS, total])
        tx = T.thread_id([THREADS])
        d = c * THREADS + tx
        seq = T.alloc_local((3,), "int32")   # 0: sequence index, 1: start, 2: end
        acc = T.alloc_local((1,), "float32")
        seq[0] = 0
        for i in T.serial(batch):
            if CU[i] <= t:
                seq[0] = i
        seq[1] = CU[seq[0]]
        seq[2] = CU[seq[0] + 1]
        acc[0] = T.Cast("float32", BIAS[d])
        for w in T.unroll(width):
            src = t - (width - 1) + w
            if src >= seq[1]:
                acc[0] = acc[0] + T.Cast("float32", X[src, d]) * T.Cast("float32", W[d, w])
        Y[t, d] = T.Cast("bfloat16", acc[0] / (T.float32(1) + T.exp(-acc[0])))
        if seq[2] - t <= width - 1:
            ST[seq[0], (width - 1) - (seq[2] - t), d] = X[t, d]
        if t == seq[1]:
            for r in T.unroll(width - 1):
                if r < (width - 1) - (seq[2] - seq[1]):
                    ST[seq[0], r, d] = T.bfloat16(0)

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    module = tvm.IRModule({"main": conv_varlen})
    return tvm.compile(module, target=target, tir_pipeline="tirx")["main"]


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
    if dim % THREADS != 0:
        raise ValueError(f"DIM={dim} must be a multiple of {THREADS}")
    key = (total, batch, dim, width)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    y = torch.empty((total, dim), dtype=x.dtype, device=x.device)
    states = torch.empty((batch, width - 1, dim), dtype=x.dtype, device=x.device)
    _compiled[key](x.contiguous(), weight.contiguous(), bias.contiguous(), cu_seqlens.contiguous(), y, states)
    return y, states
