"""GPU (sm_90a) TIRx solution: the caches are viewed as (LAYERS * 2, NUM_BLOCKS, BLOCK_ELEMS); one CTA of 256
threads per (pair, layer's K or V cache) copies the source block over the destination block, thread i moving
elements i, i + 256, ... (coalesced; sources and destinations are disjoint, so CTAs never race)."""
import torch
import tvm
from tvm.script import tirx as T

THREADS = 256
_compiled = {}
_TARGET = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})


def _build(caches, nblocks, elems, pairs):
    iters = elems // THREADS

    @T.prim_func
    def copy_blocks(c_ptr: T.handle, m_ptr: T.handle):
        C = T.match_buffer(c_ptr, (caches, nblocks, elems), "bfloat16")
        M = T.match_buffer(m_ptr, (pairs, 2), "int64")
        T.device_entry()
        p, c = T.cta_id([pairs, caches])
        tx = T.thread_id([THREADS])
        src = T.Cast("int32", M[p, 0])
        dst = T.Cast("int32", M[p, 1])
        for k in T.serial(iters):
            C[c, dst, k * THREADS + tx] = C[c, src, k * THREADS + tx]

    return tvm.compile(tvm.IRModule({"main": copy_blocks}), target=_TARGET, tir_pipeline="tirx")["main"]


def solve(kv_caches, block_mapping):
    layers, two, nblocks = kv_caches.shape[:3]
    pairs = block_mapping.shape[0]
    if two != 2 or kv_caches.dim() != 6 or block_mapping.dtype != torch.int64 or block_mapping.shape[1] != 2:
        raise ValueError("need kv_caches (LAYERS, 2, NUM_BLOCKS, BLOCK_SIZE, KV_HEADS, HEAD_DIM) and int64 (PAIRS, 2)")
    if kv_caches.dtype != torch.bfloat16 or not kv_caches.is_contiguous() or not block_mapping.is_contiguous():
        raise ValueError("kv_caches must be contiguous bfloat16 and block_mapping contiguous")
    flat = kv_caches.view(layers * 2, nblocks, -1)
    if flat.shape[2] % THREADS != 0:
        raise ValueError(f"BLOCK_SIZE * KV_HEADS * HEAD_DIM = {flat.shape[2]} must be a multiple of {THREADS}")
    shape_key = (layers * 2, nblocks, flat.shape[2], pairs)
    if shape_key not in _compiled:
        _compiled[shape_key] = _build(*shape_key)
    _compiled[shape_key](flat, block_mapping)
