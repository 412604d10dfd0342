"""GPU (sm_90a) CuTe DSL solution: one CTA per (token, head slot) with HEAD_DIM/2 threads, one rotary pair per
thread. Head slots 0..NUM_HEADS-1 rotate a query head in place; the next KV_HEADS rotate a key head in place and
write it to the key cache; the last KV_HEADS copy a value head into the value cache."""
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

_compiled = {}


@cute.kernel
def _rope_cache_kernel(mP: cute.Tensor, mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mCS: cute.Tensor,
                       mKC: cute.Tensor, mVC: cute.Tensor, mS: cute.Tensor, nheads: cutlass.Constexpr,
                       kvheads: cutlass.Constexpr, half: cutlass.Constexpr, bsize: cutlass.Constexpr):
    i, _, _ = cute.arch.thread_idx()
    t, hs, _ = cute.arch.block_idx()
    p = cutlass.Int32(mP[t])
    slot = cutlass.Int32(mS[t])
    blk = slot // bsize
    off = slot % bsize
    c = mCS[p, i]
    s = mCS[p, i + half]
    if hs < nheads:
        x1 = mQ[t, hs, i].to(cutlass.Float32)
        x2 = mQ[t, hs, i + half].to(cutlass.Float32)
        mQ[t, hs, i] = (x1 * c - x2 * s).to(cutlass.BFloat16)
        mQ[t, hs, i + half] = (x2 * c + x1 * s).to(cutlass.BFloat16)
    else:
        if hs < nheads + kvheads:
            h = hs - nheads
            y1 = mK[t, h, i].to(cutlass.Float32)
            y2 = mK[t, h, i + half].to(cutlass.Float32)
            r1 = (y1 * c - y2 * s).to(cutlass.BFloat16)
            r2 = (y2 * c + y1 * s).to(cutlass.BFloat16)
            mK[t, h, i] = r1
            mK[t, h, i + half] = r2
            mKC[blk, off, h, i] = r1
            mKC[blk, off, h, i + half] = r2
        else:
            g = hs - nheads - kvheads
            mVC[blk, off, g, i] = mV[t, g, i]
            mVC[blk, off, g, i + half] = mV[t, g, i + half]


@cute.jit
def _rope_cache(mP: cute.Tensor, mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mCS: cute.Tensor,
                mKC: cute.Tensor, mVC: cute.Tensor, mS: cute.Tensor, tokens: cutlass.Constexpr,
                nheads: cutlass.Constexpr, kvheads: cutlass.Constexpr, half: cutlass.Constexpr,
                bsize: cutlass.Constexpr):
    _rope_cache_kernel(mP, mQ, mK, mV, mCS, mKC, mVC, mS, nheads, kvheads, half, bsize).launch(
        grid=(tokens, nheads + 2 * kvheads, 1), block=(half, 1, 1))


def solve(positions, query, key, value, cos_sin_cache, key_cache, value_cache, slot_mapping):
    tokens, nheads, dim = query.shape
    kvheads = key.shape[1]
    nblocks, bsize = key_cache.shape[0], key_cache.shape[1]
    if dim % 2 != 0 or dim > 2048 or cos_sin_cache.shape[1] != dim:
        raise ValueError("HEAD_DIM must be even, at most 2048, and equal the cos/sin cache width")
    for x in (query, key, value, cos_sin_cache, key_cache, value_cache):
        if not x.is_contiguous():
            raise ValueError("all tensors must be contiguous")
    args = [from_dlpack(x) for x in (positions, query, key, value, cos_sin_cache, key_cache, value_cache,
                                     slot_mapping)]
    shape_key = (tokens, nheads, kvheads, dim, nblocks, bsize, cos_sin_cache.shape[0])
    if shape_key not in _compiled:
        _compiled[shape_key] = cute.compile(_rope_cache, *args, tokens, nheads, kvheads, dim // 2, bsize)
    _compiled[shape_key](*args)
