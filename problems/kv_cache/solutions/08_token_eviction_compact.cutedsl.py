"""GPU (sm_90a) CuTe DSL solution, in place and without a staging buffer: one CTA per (sequence, KV head, K or V)
with HEAD_DIM threads; thread d owns column d and walks j upward, copying element d of row keep_idx[b, h, j] onto
row j. keep_idx is strictly increasing, so keep_idx[b, h, j] >= j: no thread ever reads a row after it (or another
thread, which owns another column) has overwritten it, and no barrier is needed. Rows >= KEEP are never written."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

_compiled = {}


@cute.kernel
def _compact_kernel(mKC: cute.Tensor, mVC: cute.Tensor, mIDX: cute.Tensor, keep: cutlass.Constexpr):
    d, _, _ = cute.arch.thread_idx()
    b, h, kv = cute.arch.block_idx()
    if kv == 0:
        for j in range(keep):
            src = cutlass.Int32(mIDX[b, h, j])
            mKC[b, h, j, d] = mKC[b, h, src, d]
    else:
        for j in range(keep):
            src = cutlass.Int32(mIDX[b, h, j])
            mVC[b, h, j, d] = mVC[b, h, src, d]


@cute.jit
def _compact(mKC: cute.Tensor, mVC: cute.Tensor, mIDX: cute.Tensor, batch: cutlass.Constexpr,
             heads: cutlass.Constexpr, dim: cutlass.Constexpr, keep: cutlass.Constexpr):
    _compact_kernel(mKC, mVC, mIDX, keep).launch(grid=(batch, heads, 2), block=(dim, 1, 1))


def solve(key_cache, value_cache, keep_idx):
    batch, heads, seq, dim = key_cache.shape
    if key_cache.dtype != torch.bfloat16 or value_cache.dtype != torch.bfloat16 or value_cache.shape != key_cache.shape:
        raise ValueError("key_cache and value_cache must be bfloat16 (BATCH, KV_HEADS, SEQ, HEAD_DIM)")
    if keep_idx.dtype != torch.int32 or keep_idx.dim() != 3 or tuple(keep_idx.shape[:2]) != (batch, heads):
        raise ValueError("keep_idx must be int32 (BATCH, KV_HEADS, KEEP)")
    keep = keep_idx.shape[2]
    if keep > seq or dim > 1024:
        raise ValueError(f"KEEP={keep} must not exceed the cache length {seq}, HEAD_DIM={dim} at most 1024")
    for x in (key_cache, value_cache, keep_idx):
        if not x.is_contiguous():
            raise ValueError("all tensors must be contiguous (the caches are compacted in place)")
    args = [from_dlpack(x) for x in (key_cache, value_cache, keep_idx)]
    shape_key = (batch, heads, seq, dim, keep)
    if shape_key not in _compiled:
        _compiled[shape_key] = cute.compile(_compact, *args, batch, heads, dim, keep)
    _compiled[shape_key](*args)
