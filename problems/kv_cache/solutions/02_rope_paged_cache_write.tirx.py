"""GPU (sm_90a) TIRx solution: one CTA per (token, head slot) with HEAD_DIM/2 threads, one rotary pair per thread.
Head slots 0..NUM_HEADS-1 rotate a query head in place; the next KV_HEADS rotate a key head in place and write it
to the key cache; the last KV_HEADS copy a value head into the value cache."""
import tvm
from tvm.script import tirx as T

_compiled = {}
_TARGET = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})


def _build(tokens, nheads, kvheads, dim, nblocks, bsize, maxpos):
    half = dim // 2

    @T.prim_func
    def rope_cache(pos_ptr: T.handle, q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, cs_ptr: T.handle,
                   kc_ptr: T.handle, vc_ptr: T.handle, slot_ptr: T.handle):
        P = T.match_buffer(pos_ptr, (tokens,), "int64")
        Q = T.match_buffer(q_ptr, (tokens, nheads, dim), "bfloat16")
        K = T.match_buffer(k_ptr, (tokens, kvheads, dim), "bfloat16")
        V = T.match_buffer(v_ptr, (tokens, kvheads, dim), "bfloat16")
        CS = T.match_buffer(cs_ptr, (maxpos, dim), "float32")
        KC = T.match_buffer(kc_ptr, (nblocks, bsize, kvheads, dim), "bfloat16")
        VC = T.match_buffer(vc_ptr, (nblocks, bsize, kvheads, dim), "bfloat16")
        S = T.match_buffer(slot_ptr, (tokens,), "int64")
        T.device_entry()
        t, hs = T.cta_id([tokens, nheads + 2 * kvheads])
        i = T.thread_id([half])
        p = T.Cast("int32", P[t])
        slot = T.Cast("int32", S[t])
        blk = slot // bsize
        off = slot % bsize
        c = CS[p, i]
        s = CS[p, i + half]
        if hs < nheads:
            x1 = T.Cast("float32", Q[t, hs, i])
            x2 = T.Cast("float32", Q[t, hs, i + half])
            Q[t, hs, i] = T.Cast("bfloat16", x1 * c - x2 * s)
            Q[t, hs, i + half] = T.Cast("bfloat16", x2 * c + x1 * s)
        elif hs < nheads + kvheads:
            h = hs - nheads
            y1 = T.Cast("float32", K[t, h, i])
            y2 = T.Cast("float32", K[t, h, i + half])
            r1 = T.Cast("bfloat16", y1 * c - y2 * s)
            r2 = T.Cast("bfloat16", y2 * c + y1 * s)
            K[t, h, i] = r1
            K[t, h, i + half] = r2
            KC[blk, off, h, i] = r1
            KC[blk, off, h, i + half] = r2
        else:
            g = hs - nheads - kvheads
            VC[blk, off, g, i] = V[t, g, i]
            VC[blk, off, g, i + half] = V[t, g, i + half]

    return tvm.compile(tvm.IRModule({"main": rope_cache}), target=_TARGET, tir_pipeline="tirx")["main"]


def solve(positions, query, key, value, cos_sin_cache, key_cache, value_cache, slot_mapping):
    tokens, nheads, dim = query.shape
    kvheads = key.shape[1]
    nblocks, bsize = key_cache.shape[0], key_cache.shape[1]
    if dim % 2 != 0 or dim > 2048 or cos_sin_cache.shape[1] != dim:
        raise ValueError("HEAD_DIM must be even, at most 2048, and equal the cos/sin cache width")
    for x in (query, key, value, cos_sin_cache, key_cache, value_cache):
        if not x.is_contiguous():
            raise ValueError("all tensors must be contiguous")
    shape_key = (tokens, nheads, kvheads, dim, nblocks, bsize, cos_sin_cache.shape[0])
    if shape_key not in _compiled:
        _compiled[shape_key] = _build(*shape_key)
    _compiled[shape_key](positions, query, key, value, cos_sin_cache, key_cache, value_cache, slot_mapping)
