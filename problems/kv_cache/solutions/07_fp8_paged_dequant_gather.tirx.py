"""GPU (sm_90a) TIRx solution: one CTA per packed token t with HEAD_DIM threads. Each thread finds the token's
sequence as the count of cu_seqlens[1..] entries <= t (cu_seqlens is non-decreasing), its position, block and
offset through the block table, then for every KV head converts element d of the fp8 K and V rows to float32
(hardware e4m3 -> f32), multiplies by the head's per-token scale and stores it as bf16."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}
_TARGET = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})


def _build(total, batch, maxb, heads, dim, nblocks, bsize):
    @T.prim_func
    def dequant_gather(kc_ptr: T.handle, vc_ptr: T.handle, ks_ptr: T.handle, vs_ptr: T.handle, bt_ptr: T.handle,
                       cu_ptr: T.handle, ko_ptr: T.handle, vo_ptr: T.handle):
        KC = T.match_buffer(kc_ptr, (nblocks, heads, bsize, dim), "float8_e4m3fn")
        VC = T.match_buffer(vc_ptr, (nblocks, heads, bsize, dim), "float8_e4m3fn")
        KS = T.match_buffer(ks_ptr, (nblocks, heads, bsize), "float32")
        VS = T.match_buffer(vs_ptr, (nblocks, heads, bsize), "float32")
        BT = T.match_buffer(bt_ptr, (batch, maxb), "int32")
        CU = T.match_buffer(cu_ptr, (batch + 1,), "int32")
        KO = T.match_buffer(ko_ptr, (total, heads, dim), "bfloat16")
        VO = T.match_buffer(vo_ptr, (total, heads, dim), "bfloat16")
        T.device_entry()
        t = T.cta_id([total])
        d = T.thread_id([dim])
        seq = T.alloc_local((1,), "int32")
        seq[0] = 0
        for i in T.serial(batch - 1):
            if CU[i + 1] <= t:
                seq[0] = seq[0] + 1
        pos = t - CU[seq[0]]
        blk = BT[seq[0], pos // bsize]
        off = pos % bsize
        for h in T.unroll(heads):
            KO[t, h, d] = T.Cast("bfloat16", T.Cast("float32", KC[blk, h, off, d]) * KS[blk, h, off])
            VO[t, h, d] = T.Cast("bfloat16", T.Cast("float32", VC[blk, h, off, d]) * VS[blk, h, off])

    return tvm.compile(tvm.IRModule({"main": dequant_gather}), target=_TARGET, tir_pipeline="tirx")["main"]


def solve(key_cache, value_cache, k_scales, v_scales, block_table, cu_seqlens):
    nblocks, heads, bsize, dim = key_cache.shape
    batch, maxb = block_table.shape
    if key_cache.dtype != torch.float8_e4m3fn or value_cache.dtype != torch.float8_e4m3fn or dim > 1024:
        raise ValueError("caches must be float8_e4m3fn (NUM_BLOCKS, KV_HEADS, BLOCK_SIZE, HEAD_DIM), HEAD_DIM <= 1024")
    if k_scales.dtype != torch.float32 or v_scales.dtype != torch.float32 or k_scales.shape != (nblocks, heads, bsize):
        raise ValueError("scales must be float32 (NUM_BLOCKS, KV_HEADS, BLOCK_SIZE)")
    if block_table.dtype != torch.int32 or cu_seqlens.dtype != torch.int32 or cu_seqlens.numel() != batch + 1:
        raise ValueError("block_table (BATCH, MAX_BLOCKS) and cu_seqlens (BATCH + 1,) must be int32")
    for x in (key_cache, value_cache, k_scales, v_scales, block_table, cu_seqlens):
        if not x.is_contiguous():
            raise ValueError("all tensors must be contiguous")
    total = int(cu_seqlens[-1])
    k_packed = torch.empty(total, heads, dim, dtype=torch.bfloat16, device=key_cache.device)
    v_packed = torch.empty(total, heads, dim, dtype=torch.bfloat16, device=key_cache.device)
    shape_key = (total, batch, maxb, heads, dim, nblocks, bsize)
    if shape_key not in _compiled:
        _compiled[shape_key] = _build(*shape_key)
    _compiled[shape_key](key_cache, value_cache, k_scales, v_scales, block_table, cu_seqlens, k_packed, v_packed)
    return k_packed, v_packed
