"""CPU-target (LLVM) TIRx solution: serial loops per token, K/V and KV head: the head's absmax, scale =
max(amax, 1e-6) / 127 written to kv_scales, then each element rounded to nearest (x / scale), clamped to
[-127, 127] and stored as int8 at the token's slot of the HND-layout cache."""
import torch
import tvm
from tvm.script import tirx as T

INT8_MAX = 127.0
SCALE_MIN = 1e-6
_compiled = {}


def _build(tokens, heads, dim, nblocks, bsize):
    @T.prim_func
    def int8_append(k_ptr: T.handle, v_ptr: T.handle, c_ptr: T.handle, s_ptr: T.handle, slot_ptr: T.handle):
        K = T.match_buffer(k_ptr, (tokens, heads, dim), "bfloat16")
        V = T.match_buffer(v_ptr, (tokens, heads, dim), "bfloat16")
        C = T.match_buffer(c_ptr, (nblocks, 2, heads, bsize, dim), "int8")
        S = T.match_buffer(s_ptr, (nblocks, 2, heads, bsize), "float32")
        SL = T.match_buffer(slot_ptr, (tokens,), "int64")
        acc = T.alloc_buffer((2,), "float32")   # amax, scale
        for t in T.serial(tokens):
            slot = T.Cast("int32", SL[t])
            blk = slot // bsize
            off = slot % bsize
            for h in T.serial(heads):
                acc[0] = T.float32(0)
                for d in T.serial(dim):
                    acc[0] = T.max(acc[0], T.abs(T.Cast("float32", K[t, h, d])))
                acc[1] = T.max(acc[0], T.float32(SCALE_MIN)) / T.float32(INT8_MAX)
                S[blk, 0, h, off] = acc[1]
                for d in T.serial(dim):
                    q = T.nearbyint(T.Cast("float32", K[t, h, d]) / acc[1])
                    C[blk, 0, h, off, d] = T.Cast("int8", T.min(T.max(q, T.float32(-INT8_MAX)), T.float32(INT8_MAX)))
                acc[0] = T.float32(0)
                for d in T.serial(dim):
                    acc[0] = T.max(acc[0], T.abs(T.Cast("float32", V[t, h, d])))
                acc[1] = T.max(acc[0], T.float32(SCALE_MIN)) / T.float32(INT8_MAX)
                S[blk, 1, h, off] = acc[1]
                for d in T.serial(dim):
                    q = T.nearbyint(T.Cast("float32", V[t, h, d]) / acc[1])
                    C[blk, 1, h, off, d] = T.Cast("int8", T.min(T.max(q, T.float32(-INT8_MAX)), T.float32(INT8_MAX)))

    return tvm.compile(tvm.IRModule({"main": int8_append}), target="llvm", tir_pipeline="tirx")["main"]


def solve(key, value, kv_cache, kv_scales, slot_mapping):
    tokens, heads, dim = key.shape
    nblocks, bsize = kv_cache.shape[0], kv_cache.shape[3]
    if kv_cache.dtype != torch.int8 or kv_scales.dtype != torch.float32:
        raise ValueError("kv_cache must be int8 and kv_scales float32")
    if kv_cache.shape != (nblocks, 2, heads, bsize, dim) or kv_scales.shape != (nblocks, 2, heads, bsize):
        raise ValueError("kv_cache must be (NUM_BLOCKS, 2, KV_HEADS, BLOCK_SIZE, HEAD_DIM), kv_scales without HEAD_DIM")
    for x in (key, value, kv_cache, kv_scales, slot_mapping):
        if not x.is_contiguous():
            raise ValueError("all tensors must be contiguous")
    shape_key = (tokens, heads, dim, nblocks, bsize)
    if shape_key not in _compiled:
        _compiled[shape_key] = _build(*shape_key)
    _compiled[shape_key](key, value, kv_cache, kv_scales, slot_mapping)
