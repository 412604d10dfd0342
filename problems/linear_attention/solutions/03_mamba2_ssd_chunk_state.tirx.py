"""GPU (sm_90a) TIRx solution: one CTA per (head, chunk, batch), one thread per state column n (DSTATE threads),
each holding its column of the (HEADDIM, DSTATE) state tile in HEADDIM float32 registers. For each position l of
the chunk, w = dt[l] * exp(dA_cumsum[last] - dA_cumsum[l]) (CTA-uniform, exp in float64: TVM builds with
--use_fast_math) weights x[l, :] (warp-uniform broadcasts) and every thread adds (x[l, p] * w) * B[l, n] for all p
(B[l, :] read coalesced). The tile is written once at the end, coalesced along n."""
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
        T.device_entry()
        h, c, b = T.cta_id([nheads, nchunks, batch])
        n = T.thread_id([dstate])
        g = h // heads_per_group
        acc = T.alloc_local((headdim,), "float32")
        for p in T.unroll(headdim):
            acc[p] = T.float32(0)
        for l in T.serial(chunk):
            w = T.Cast("float32", T.exp(T.Cast("float64", DA[b, h, c, chunk - 1] - DA[b, h, c, l]))) * DT[b, h, c, l]
            bn = T.Cast("float32", Bm[b, c * chunk + l, g, n])
            for p in T.unroll(headdim):
                acc[p] = acc[p] + (T.Cast("float32", X[b, c * chunk + l, h, p]) * w) * bn
        for p in T.unroll(headdim):
            S[b, c, h, p, n] = acc[p]

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    module = tvm.IRModule({"main": ssd_chunk_state})
    return tvm.compile(module, target=target, tir_pipeline="tirx")["main"]


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
    if dstate % 32 != 0 or dstate > 1024 or headdim > 128:
        raise ValueError("DSTATE must be a multiple of 32 (<= 1024) and HEADDIM <= 128 (registers per thread)")
    key = (batch, seqlen, nheads, headdim, ngroups, dstate, chunk)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    states = torch.empty((batch, nchunks, nheads, headdim, dstate), dtype=torch.float32, device=x.device)
    _compiled[key](x.contiguous(), B.contiguous(), dt.contiguous(), dA_cumsum.contiguous(), states)
    return states
