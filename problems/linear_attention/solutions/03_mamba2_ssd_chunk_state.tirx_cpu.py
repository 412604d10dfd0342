"""CPU-target (LLVM) TIRx solution: per (batch, chunk, head), a float32 state tile (HEADDIM, DSTATE) is zeroed and
then, for each position l of the chunk, w = dt[l] * exp(dA_cumsum[last] - dA_cumsum[l]) (exp in float64) weights
x[l, :] and the rank-1 update (x[l] * w) B[l]^T is added: the decay-weighted reduction over the chunk."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(batch: int, seqlen: int, nheads: int, headdim: int, ngroups: int, dstate: int, chunk: int):
    nchunks = seqlen // chunk
    heads_per_group = nheads // ngroups

    @T.prim_func
    def ssd_chunk_state(x_ptr: T.handle, b_ptr: T.handle, dt_ptr: T.handle, da_ptr: T.handle, s_ptr: T.handle):
        X = T.match_buffer(x_ptr, (batch, seqlen, nheads, headdim), "bfloat16")
        Bm = T.match_buffer(b_ptr, (batch, seqlen, ngroups, dstate), "bfloat16")
        DT = T.match_buffer(dt_ptr, (batch, nheads, nchunks, chunk), "float32")
        DA = T.match_buffer(da_ptr, (batch, nheads, nchunks, chunk), "float32")
        S = T.match_buffer(s_ptr, (batch, nchunks, nheads, headdim, dstate), "float32")
        w = T.alloc_buffer((1,), "float32")
        xw = T.alloc_buffer((1,), "float32")
        for b in T.serial(batch):
            for c in T.serial(nchunks):
                for h in T.serial(nheads):
                    for p in T.serial(headdim):
                        for n in T.serial(dstate):
                            S[b, c, h, p, n] = T.float32(0)
                    for l in T.serial(chunk):
                        w[0] = T.Cast("float32", T.exp(T.Cast("float64", DA[b, h, c, chunk - 1] - DA[b, h, c, l]))) \
                            * DT[b, h, c, l]
                        for p in T.serial(headdim):
                            xw[0] = T.Cast("float32", X[b, c * chunk + l, h, p]) * w[0]
                            for n in T.serial(dstate):
                                S[b, c, h, p, n] = S[b, c, h, p, n] + xw[0] * T.Cast(
                                    "float32", Bm[b, c * chunk + l, h // heads_per_group, n])

    module = tvm.IRModule({"main": ssd_chunk_state})
    return tvm.compile(module, target="llvm", tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor, B: torch.Tensor, dt: torch.Tensor, dA_cumsum: torch.Tensor):
    batch, seqlen, nheads, headdim = x.shape
    ngroups, dstate = B.shape[2], B.shape[3]
    nchunks, chunk = dt.shape[2], dt.shape[3]
    if x.dtype != torch.bfloat16 or B.dtype != torch.bfloat16:
        raise ValueError("x and B must be bfloat16")
    if dt.dtype != torch.float32 or dA_cumsum.dtype != torch.float32 or dA_cumsum.shape != dt.shape:
        raise ValueError("dt and dA_cumsum must be float32 (BATCH, NHEADS, NCHUNKS, CHUNK)")
    if nchunks * chunk != seqlen or nheads % ngroups != 0 or tuple(B.shape[:2]) != (batch, seqlen):
        raise ValueError("SEQLEN must be NCHUNKS * CHUNK, NHEADS a multiple of NGROUPS, B (BATCH, SEQLEN, ...)")
    key = (batch, seqlen, nheads, headdim, ngroups, dstate, chunk)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    states = torch.empty((batch, nchunks, nheads, headdim, dstate), dtype=torch.float32)
    _compiled[key](x.contiguous(), B.contiguous(), dt.contiguous(), dA_cumsum.contiguous(), states)
    return states
