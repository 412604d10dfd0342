"""CPU-target (LLVM) TIRx solution: the caches are viewed as (LAYERS * 2, NUM_BLOCKS, BLOCK_ELEMS); serial loops
over pairs and over the layers' K and V caches copy the source block's BLOCK_SIZE * KV_HEADS * HEAD_DIM elements
over the destination block (sources and destinations are disjoint, so the order does not matter)."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(caches, nblocks, elems, pairs):
    @T.prim_func
    def copy_blocks(c_ptr: T.handle, m_ptr: T.handle):
        C = T.match_buffer(c_ptr, (caches, nblocks, elems), "bfloat16")
        M = T.match_buffer(m_ptr, (pairs, 2), "int64")
        for p in T.serial(pairs):
            src = T.Cast("int32", M[p, 0])
            dst = T.Cast("int32", M[p, 1])
            for c in T.serial(caches):
                for e in T.serial(elems):
                    C[c, dst, e] = C[c, src, e]

    return tvm.compile(tvm.IRModule({"main": copy_blocks}), target="llvm", tir_pipeline="tirx")["main"]


def solve(kv_caches, block_mapping):
    layers, two, nblocks = kv_caches.shape[:3]
    pairs = block_mapping.shape[0]
    if two != 2 or kv_caches.dim() != 6 or block_mapping.dtype != torch.int64 or block_mapping.shape[1] != 2:
        raise ValueError("need kv_caches (LAYERS, 2, NUM_BLOCKS, BLOCK_SIZE, KV_HEADS, HEAD_DIM) and int64 (PAIRS, 2)")
    if kv_caches.dtype != torch.bfloat16 or not kv_caches.is_contiguous() or not block_mapping.is_contiguous():
        raise ValueError("kv_caches must be contiguous bfloat16 and block_mapping contiguous")
    flat = kv_caches.view(layers * 2, nblocks, -1)
    shape_key = (layers * 2, nblocks, flat.shape[2], pairs)
    if shape_key not in _compiled:
        _compiled[shape_key] = _build(*shape_key)
    _compiled[shape_key](flat, block_mapping)
