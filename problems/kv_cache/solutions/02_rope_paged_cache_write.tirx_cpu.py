"""CPU-target (LLVM) TIRx solution: serial loops per token: rotate each query and key head pair-wise in place
(fp32 math, bf16 store), then copy the rotated key and the value into the paged caches at the token's slot."""
import tvm
from tvm.script import tirx as T

_compiled = {}


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
        for t in T.serial(tokens):
            p = T.Cast("int32", P[t])
            slot = T.Cast("int32", S[t])
            blk = slot // bsize
            off = slot % bsize
            for h in T.serial(nheads):
                for i in T.serial(half):
                    x1 = T.Cast("float32", Q[t, h, i])
                    x2 = T.Cast("float32", Q[t, h, i + half])
                    Q[t, h, i] = T.Cast("bfloat16", x1 * CS[p, i] - x2 * CS[p, i + half])
                    Q[t, h, i + half] = T.Cast("bfloat16", x2 * CS[p, i] + x1 * CS[p, i + half])
            for h in T.serial(kvheads):
                for i in T.serial(half):
                    y1 = T.Cast("float32", K[t, h, i])
                    y2 = T.Cast("float32", K[t, h, i + half])
                    r1 = T.Cast("bfloat16", y1 * CS[p, i] - y2 * CS[p, i + half])
                    r2 = T.Cast("bfloat16", y2 * CS[p, i] + y1 * CS[p, i + half])
                    K[t, h, i] = r1
                    K[t, h, i + half] = r2
                    KC[blk, off, h, i] = r1
                    KC[blk, off, h, i + half] = r2
                for d in T.serial(dim):
                    VC[blk, off, h, d] = V[t, h, d]

    return tvm.compile(tvm.IRModule({"main": rope_cache}), target="llvm", tir_pipeline="tirx")["main"]


def solve(positions, query, key, value, cos_sin_cache, key_cache, value_cache, slot_mapping):
    tokens, nheads, dim = query.shape
    kvheads = key.shape[1]
    nblocks, bsize = key_cache.shape[0], key_cache.shape[1]
    if dim % 2 != 0 or cos_sin_cache.shape[1] != dim:
        raise ValueError("HEAD_DIM must be even and equal the cos/sin cache width")
    for x in (query, key, value, cos_sin_cache, key_cache, value_cache):
        if not x.is_contiguous():
            raise ValueError("all tensors must be contiguous")
    shape_key = (tokens, nheads, kvheads, dim, nblocks, bsize, cos_sin_cache.shape[0])
    if shape_key not in _compiled:
        _compiled[shape_key] = _build(*shape_key)
    _compiled[shape_key](positions, query, key, value, cos_sin_cache, key_cache, value_cache, slot_mapping)
