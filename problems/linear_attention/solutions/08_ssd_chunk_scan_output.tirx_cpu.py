"""CPU-target (LLVM) TIRx solution, the GPU kernels' two stages made serial. Stage 1: per (batch, chunk, group) the
causal C B^T matrix cb[l, s] = C_l . B_s (s <= l, 0 above) into a float32 scratch. Stage 2: per (batch, chunk,
head), LT = 32 rows at a time, the decayed weights W[l, s] = cb[l, s] exp(dA_cumsum[l] - dA_cumsum[s]) dt[s]
(exp in float64) are formed once, then for every head_dim column p (one GPU thread each, the carried state row
states[c, h, p, :] held aside): y[l, p] = sum_{s <= l} W[l, s] x[s, p] + exp(dA_cumsum[l]) (C_l . state_p)
+ D[h] x[l, p], accumulated in float32 and rounded once to bf16."""
import torch
import tvm
from tvm.script import tirx as T

LT = 32            # rows of the decayed-weight tile
_compiled = {}


def _build(batch, seqlen, nheads, headdim, ngroups, dstate, chunk):
    nchunks = seqlen // chunk
    rep = nheads // ngroups

    @T.prim_func
    def ssd_chunk_scan(x_ptr: T.handle, b_ptr: T.handle, c_ptr: T.handle, dt_ptr: T.handle, da_ptr: T.handle,
                       st_ptr: T.handle, d_ptr: T.handle, cb_ptr: T.handle, y_ptr: T.handle):
        X = T.match_buffer(x_ptr, (batch, seqlen, nheads, headdim), "bfloat16")
        Bm = T.match_buffer(b_ptr, (batch, seqlen, ngroups, dstate), "bfloat16")
        Cm = T.match_buffer(c_ptr, (batch, seqlen, ngroups, dstate), "bfloat16")
        DT = T.match_buffer(dt_ptr, (batch, nheads, nchunks, chunk), "float32")
        DA = T.match_buffer(da_ptr, (batch, nheads, nchunks, chunk), "float32")
        ST = T.match_buffer(st_ptr, (batch, nchunks, nheads, headdim, dstate), "float32")
        Dv = T.match_buffer(d_ptr, (nheads,), "float32")
        CB = T.match_buffer(cb_ptr, (batch, nchunks, ngroups, chunk, chunk), "float32")
        Y = T.match_buffer(y_ptr, (batch, seqlen, nheads, headdim), "bfloat16")
        W = T.alloc_buffer((LT, chunk), "float32")
        acc = T.alloc_buffer((2,), "float32")
        for b in T.serial(batch):                       # stage 1: causal C B^T per chunk and group
            for c in T.serial(nchunks):
                for g in T.serial(ngroups):
                    for l in T.serial(chunk):
                        for s in T.serial(chunk):
                            acc[0] = T.float32(0)
                            if s <= l:
                                for n in T.serial(dstate):
                                    acc[0] = acc[0] + T.Cast("float32", Cm[b, c * chunk + l, g, n]) \
                                        * T.Cast("float32", Bm[b, c * chunk + s, g, n])
                            CB[b, c, g, l, s] = acc[0]
        for b in T.serial(batch):                       # stage 2: the chunk scan output
            for c in T.serial(nchunks):
                for h in T.serial(nheads):
                    for lt in T.serial(chunk // LT):
                        for r in T.serial(LT):
                            for s in T.serial(chunk):
                                W[r, s] = T.float32(0)
                                if s <= lt * LT + r:
                                    W[r, s] = CB[b, c, h // rep, lt * LT + r, s] * T.Cast("float32", T.exp(
                                        T.Cast("float64", DA[b, h, c, lt * LT + r] - DA[b, h, c, s]))) \
                                        * DT[b, h, c, s]
                        for p in T.serial(headdim):
                            for r in T.serial(LT):
                                l = lt * LT + r
                                acc[0] = T.float32(0)
                                for s in T.serial(l + 1):
                                    acc[0] = acc[0] + W[r, s] * T.Cast("float32", X[b, c * chunk + s, h, p])
                                acc[1] = T.float32(0)
                                for n in T.serial(dstate):
                                    acc[1] = acc[1] + T.Cast("float32", Cm[b, c * chunk + l, h // rep, n]) \
                                        * ST[b, c, h, p, n]
                                Y[b, c * chunk + l, h, p] = T.Cast("bfloat16", acc[0] + T.Cast("float32", T.exp(
                                    T.Cast("float64", DA[b, h, c, l]))) * acc[1]
                                    + Dv[h] * T.Cast("float32", X[b, c * chunk + l, h, p]))

    return tvm.compile(tvm.IRModule({"main": ssd_chunk_scan}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x, B, C, dt, dA_cumsum, states, D):
    batch, seqlen, nheads, headdim = x.shape
    ngroups, dstate = B.shape[2], B.shape[3]
    nchunks, chunk = dt.shape[2], dt.shape[3]
    if x.dtype != torch.bfloat16 or B.dtype != torch.bfloat16 or C.dtype != torch.bfloat16:
        raise ValueError("x, B and C must be bfloat16")
    if dt.dtype != torch.float32 or dA_cumsum.dtype != torch.float32 or states.dtype != torch.float32 \
            or D.dtype != torch.float32:
        raise ValueError("dt, dA_cumsum, states and D must be float32")
    if nchunks * chunk != seqlen or nheads % ngroups != 0 or C.shape != B.shape or dA_cumsum.shape != dt.shape \
            or tuple(states.shape) != (batch, nchunks, nheads, headdim, dstate):
        raise ValueError("inconsistent shapes (see the problem's reference for the layout)")
    if chunk % LT != 0:
        raise ValueError(f"CHUNK={chunk} must be a multiple of {LT}")
    key = (batch, seqlen, nheads, headdim, ngroups, dstate, chunk)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    cb = torch.empty((batch, nchunks, ngroups, chunk, chunk), dtype=torch.float32)
    y = torch.empty((batch, seqlen, nheads, headdim), dtype=torch.bfloat16)
    _compiled[key](x.contiguous(), B.contiguous(), C.contiguous(), dt.contiguous(), dA_cumsum.contiguous(),
                   states.contiguous(), D.contiguous(), cb, y)
    return y
