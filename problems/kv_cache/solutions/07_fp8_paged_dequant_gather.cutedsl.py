"""GPU (sm_90a) CuTe DSL solution: one CTA per packed token t with HEAD_DIM threads. Each thread finds the token's
sequence as the count of cu_seqlens[1..] entries <= t (cu_seqlens is non-decreasing), its position, block and
offset through the block table, then for every KV head converts element d of the fp8 K and V rows to float32,
multiplies by the head's per-token scale and stores it as bf16."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

_compiled = {}


@cute.kernel
def _dequant_gather_kernel(mKC: cute.Tensor, mVC: cute.Tensor, mKS: cute.Tensor, mVS: cute.Tensor, mBT: cute.Tensor,
                           mCU: cute.Tensor, mKO: cute.Tensor, mVO: cute.Tensor, batch: cutlass.Constexpr,
                           heads: cutlass.Constexpr, bsize: cutlass.Constexpr):
    d, _, _ = cute.arch.thread_idx()
    t, _, _ = cute.arch.block_idx()
    tok = cutlass.Int32(t)
    seq = cutlass.Int32(0)
    for i in cutlass.range_constexpr(batch - 1):
        if cutlass.Int32(mCU[i + 1]) <= tok:
            seq = seq + 1
    pos = tok - cutlass.Int32(mCU[seq])
    blk = cutlass.Int32(mBT[seq, pos // bsize])
    off = pos % bsize
    for h in cutlass.range_constexpr(heads):
        mKO[tok, h, d] = (mKC[blk, h, off, d].to(cutlass.Float32) * mKS[blk, h, off]).to(cutlass.BFloat16)
        mVO[tok, h, d] = (mVC[blk, h, off, d].to(cutlass.Float32) * mVS[blk, h, off]).to(cutlass.BFloat16)


@cute.jit
def _dequant_gather(mKC: cute.Tensor, mVC: cute.Tensor, mKS: cute.Tensor, mVS: cute.Tensor, mBT: cute.Tensor,
                    mCU: cute.Tensor, mKO: cute.Tensor, mVO: cute.Tensor, total: cutlass.Constexpr,
                    batch: cutlass.Constexpr, heads: cutlass.Constexpr, dim: cutlass.Constexpr,
                    bsize: cutlass.Constexpr):
    _dequant_gather_kernel(mKC, mVC, mKS, mVS, mBT, mCU, mKO, mVO, batch, heads, bsize).launch(
        grid=(total, 1, 1), block=(dim, 1, 1))


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
    args = [from_dlpack(x) for x in (key_cache, value_cache, k_scales, v_scales, block_table, cu_seqlens,
                                     k_packed, v_packed)]
    shape_key = (total, batch, maxb, heads, dim, nblocks, bsize)
    if shape_key not in _compiled:
        _compiled[shape_key] = cute.compile(_dequant_gather, *args, total, batch, heads, dim, bsize)
    _compiled[shape_key](*args)
    return k_packed, v_packed
