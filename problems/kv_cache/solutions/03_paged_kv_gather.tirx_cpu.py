"""CPU-target (LLVM) TIRx solution: serial loop over packed tokens t: the sequence is the count of cu_seqlens[1..]
entries <= t (cu_seqlens is non-decreasing), the position is t - cu_seqlens[b], the slot comes from the block
table; then copy the token's KV_HEADS x HEAD_DIM row of K and of V."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(total, batch, maxb, heads, dim, nblocks, bsize):
    @T.prim_func
    def gather(kc_ptr: T.handle, vc_ptr: T.handle, bt_ptr: T.handle, cu_ptr: T.handle, ko_ptr: T.handle,
               vo_ptr: T.handle):
        KC = T.match_buffer(kc_ptr, (nblocks, bsize, heads, dim), "bfloat16")
        VC = T.match_buffer(vc_ptr, (nblocks, bsize, heads, dim), "bfloat16")
        BT = T.match_buffer(bt_ptr, (batch, maxb), "int32")
        CU = T.match_buffer(cu_ptr, (batch + 1,), "int32")
        KO = T.match_buffer(ko_ptr, (total, heads, dim), "bfloat16")
        VO = T.match_buffer(vo_ptr, (total, heads, dim), "bfloat16")
        seq = T.alloc_buffer((1,), "int32")
        for t in T.serial(total):
            seq[0] = 0
            for i in T.serial(batch - 1):
                if CU[i + 1] <= t:
                    seq[0] = seq[0] + 1
            pos = t - CU[seq[0]]
            blk = BT[seq[0], pos // bsize]
            off = pos % bsize
            for h in T.serial(heads):
                for d in T.serial(dim):
                    KO[t, h, d] = KC[blk, off, h, d]
                    VO[t, h, d] = VC[blk, off, h, d]

    return tvm.compile(tvm.IRModule({"main": gather}), target="llvm", tir_pipeline="tirx")["main"]


def solve(key_cache, value_cache, block_table, cu_seqlens):
    nblocks, bsize, heads, dim = key_cache.shape
    batch, maxb = block_table.shape
    if block_table.dtype != torch.int32 or cu_seqlens.dtype != torch.int32 or cu_seqlens.numel() != batch + 1:
        raise ValueError("block_table (BATCH, MAX_BLOCKS) and cu_seqlens (BATCH + 1,) must be int32")
    for x in (key_cache, value_cache, block_table, cu_seqlens):
        if not x.is_contiguous():
            raise ValueError("all tensors must be contiguous")
    total = int(cu_seqlens[-1])
    k_packed = torch.empty(total, heads, dim, dtype=key_cache.dtype)
    v_packed = torch.empty(total, heads, dim, dtype=value_cache.dtype)
    shape_key = (total, batch, maxb, heads, dim, nblocks, bsize)
    if shape_key not in _compiled:
        _compiled[shape_key] = _build(*shape_key)
    _compiled[shape_key](key_cache, value_cache, block_table, cu_seqlens, k_packed, v_packed)
    return k_packed, v_packed
