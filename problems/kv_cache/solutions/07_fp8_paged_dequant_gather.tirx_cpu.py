"""CPU-target (LLVM) TIRx solution: serial loop over packed tokens t: the sequence is the count of cu_seqlens[1..]
entries <= t (cu_seqlens is non-decreasing), the position is t - cu_seqlens[b], the block and offset come from the
block table; then for each KV head the token's fp8 codes (read as uint8 and decoded to float32 exactly by integer
bit arithmetic) are multiplied by that head's scale and rounded once to bf16, for K and for V."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _fp8_value(code):
    """Exact float32 of the float8_e4m3fn bit pattern `code` (int32 in 0..255; the cache holds no NaN)."""
    exp = T.bitwise_and(T.shift_right(code, 3), 15)
    man = T.bitwise_and(code, 7)
    # normal: 2^(exp-7) * (1 + man/8) -> float32 exponent field exp - 7 + 127, mantissa man << 20
    normal = T.reinterpret("float32", T.bitwise_or(T.shift_left(exp + 120, 23), T.shift_left(man, 20)))
    sub = T.Cast("float32", man) * T.float32(1.0 / 512.0)     # subnormal: man/8 * 2^-6
    mag = T.Select(exp == 0, sub, normal)
    return T.Select(T.bitwise_and(code, 128) != 0, -mag, mag)


def _build(total, batch, maxb, heads, dim, nblocks, bsize):
    @T.prim_func
    def dequant_gather(kc_ptr: T.handle, vc_ptr: T.handle, ks_ptr: T.handle, vs_ptr: T.handle, bt_ptr: T.handle,
                       cu_ptr: T.handle, ko_ptr: T.handle, vo_ptr: T.handle):
        KC = T.match_buffer(kc_ptr, (nblocks, heads, bsize, dim), "uint8")
        VC = T.match_buffer(vc_ptr, (nblocks, heads, bsize, dim), "uint8")
        KS = T.match_buffer(ks_ptr, (nblocks, heads, bsize), "float32")
        VS = T.match_buffer(vs_ptr, (nblocks, heads, bsize), "float32")
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
                    KO[t, h, d] = T.Cast("bfloat16", _fp8_value(T.Cast("int32", KC[blk, h, off, d])) * KS[blk, h, off])
                    VO[t, h, d] = T.Cast("bfloat16", _fp8_value(T.Cast("int32", VC[blk, h, off, d])) * VS[blk, h, off])

    return tvm.compile(tvm.IRModule({"main": dequant_gather}), target="llvm", tir_pipeline="tirx")["main"]


def solve(key_cache, value_cache, k_scales, v_scales, block_table, cu_seqlens):
    nblocks, heads, bsize, dim = key_cache.shape
    batch, maxb = block_table.shape
    if key_cache.dtype != torch.float8_e4m3fn or value_cache.dtype != torch.float8_e4m3fn:
        raise ValueError("caches must be float8_e4m3fn (NUM_BLOCKS, KV_HEADS, BLOCK_SIZE, HEAD_DIM)")
    if k_scales.dtype != torch.float32 or v_scales.dtype != torch.float32 or k_scales.shape != (nblocks, heads, bsize):
        raise ValueError("scales must be float32 (NUM_BLOCKS, KV_HEADS, BLOCK_SIZE)")
    if block_table.dtype != torch.int32 or cu_seqlens.dtype != torch.int32 or cu_seqlens.numel() != batch + 1:
        raise ValueError("block_table (BATCH, MAX_BLOCKS) and cu_seqlens (BATCH + 1,) must be int32")
    for x in (key_cache, value_cache, k_scales, v_scales, block_table, cu_seqlens):
        if not x.is_contiguous():
            raise ValueError("all tensors must be contiguous")
    total = int(cu_seqlens[-1])
    k_packed = torch.empty(total, heads, dim, dtype=torch.bfloat16)
    v_packed = torch.empty(total, heads, dim, dtype=torch.bfloat16)
    shape_key = (total, batch, maxb, heads, dim, nblocks, bsize)
    if shape_key not in _compiled:
        _compiled[shape_key] = _build(*shape_key)
    _compiled[shape_key](key_cache.view(torch.uint8), value_cache.view(torch.uint8), k_scales, v_scales,
                         block_table, cu_seqlens, k_packed, v_packed)
    return k_packed, v_packed
