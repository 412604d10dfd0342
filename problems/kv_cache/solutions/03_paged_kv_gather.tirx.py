"""GPU (sm_90a) TIRx solution: one CTA per packed token t with HEAD_DIM threads. Each thread finds the token's
sequence as the count of cu_seqlens[1..] entries <= t (cu_seqlens is non-decreasing), its position and its slot
through the block table, then copies element d of every KV head of K and of V."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}
_TARGET = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})


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
        T.device_entry()
        t = T.cta_id([total])
        d = T.thread_id([dim])
        seq = T.alloc_local((1,), "int32")
        seq[0] = 0
        for i in T.unroll(batch - 1):
            if CU[i + 1] <= t:
                seq[0] = seq[0] + 1
        pos = t - CU[seq[0]]
        blk = BT[seq[0], pos // bsize]
        off = pos % bsize
        for h in T.unroll(heads):
            KO[t, h, d] = KC[blk, off, h, d]
            VO[t, h, d] = VC[blk, off, h, d]

    return tvm.compile(tvm.IRModule({"main": gather}), target=_TARGET, tir_pipeline="tirx")["main"]


def solve(key_cache, value_cache, block_table, cu_seqlens):
    nblocks, bsize, heads, dim = key_cache.shape
    batch, maxb = block_table.shape
    if block_table.dtype != torch.int32 or cu_seqlens.dtype != torch.int32 or cu_seqlens.numel() != batch + 1:
        raise ValueError("block_table (BATCH, MAX_BLOCKS) and cu_seqlens (BATCH + 1,) must be int32")
    if key_cache.dtype != torch.bfloat16 or value_cache.dtype != torch.bfloat16 or dim > 1024:
        raise ValueError("caches must be bfloat16 with HEAD_DIM <= 1024")
    for x in (key_cache, value_cache, block_table, cu_seqlens):
        if not x.is_contiguous():
            raise ValueError("all tensors must be contiguous")
    total = int(cu_seqlens[-1])
    k_packed = torch.empty(total, heads, dim, dtype=key_cache.dtype, device=key_cache.device)
    v_packed = torch.empty(total, heads, dim, dtype=value_cache.dtype, device=value_cache.device)
    shape_key = (total, batch, maxb, heads, dim, nblocks, bsize)
    if shape_key not in _compiled:
        _compiled[shape_key] = _build(*shape_key)
    _compiled[shape_key](key_cache, value_cache, block_table, cu_seqlens, k_packed, v_packed)
    return k_packed, v_packed
