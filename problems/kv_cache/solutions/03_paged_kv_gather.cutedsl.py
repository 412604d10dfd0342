"""GPU (sm_90a) CuTe DSL solution: one CTA per packed token t with HEAD_DIM threads. Each thread finds the token's
sequence as the count of cu_seqlens[1..] entries <= t (cu_seqlens is non-decreasing), its position and its slot
through the block table, then copies element d of every KV head of K and of V."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

_compiled = {}


@cute.kernel
def _gather_kernel(mKC: cute.Tensor, mVC: cute.Tensor, mBT: cute.Tensor, mCU: cute.Tensor, mKO: cute.Tensor,
                   mVO: cute.Tensor, batch: cutlass.Constexpr, heads: cutlass.Constexpr, bsize: cutlass.Constexpr):
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
        mKO[tok, h, d] = mKC[blk, off, h, d]
        mVO[tok, h, d] = mVC[blk, off, h, d]


@cute.jit
def _gather(mKC: cute.Tensor, mVC: cute.Tensor, mBT: cute.Tensor, mCU: cute.Tensor, mKO: cute.Tensor,
            mVO: cute.Tensor, total: cutlass.Constexpr, batch: cutlass.Constexpr, heads: cutlass.Constexpr,
            dim: cutlass.Constexpr, bsize: cutlass.Constexpr):
    _gather_kernel(mKC, mVC, mBT, mCU, mKO, mVO, batch, heads, bsize).launch(grid=(total, 1, 1),
                                                                             block=(dim, 1, 1))


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
    args = [from_dlpack(x) for x in (key_cache, value_cache, block_table, cu_seqlens, k_packed, v_packed)]
    shape_key = (total, batch, maxb, heads, dim, nblocks, bsize)
    if shape_key not in _compiled:
        _compiled[shape_key] = cute.compile(_gather, *args, total, batch, heads, dim, bsize)
    _compiled[shape_key](*args)
    return k_packed, v_packed
