"""GPU (sm_90a) CuTe DSL solution: the caches are viewed as (LAYERS * 2, NUM_BLOCKS, BLOCK_ELEMS); one CTA of 256
threads per (pair, layer's K or V cache) copies the source block over the destination block, thread i moving
elements i, i + 256, ... (coalesced; sources and destinations are disjoint, so CTAs never race)."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

THREADS = 256
_compiled = {}


@cute.kernel
def _copy_blocks_kernel(mC: cute.Tensor, mM: cute.Tensor, iters: cutlass.Constexpr):
    tx, _, _ = cute.arch.thread_idx()
    p, c, _ = cute.arch.block_idx()
    src = cutlass.Int32(mM[p, 0])
    dst = cutlass.Int32(mM[p, 1])
    for k in range(iters):
        e = k * THREADS + tx
        mC[c, dst, e] = mC[c, src, e]


@cute.jit
def _copy_blocks(mC: cute.Tensor, mM: cute.Tensor, caches: cutlass.Constexpr, pairs: cutlass.Constexpr,
                 iters: cutlass.Constexpr):
    _copy_blocks_kernel(mC, mM, iters).launch(grid=(pairs, caches, 1), block=(THREADS, 1, 1))


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
    args = [from_dlpack(x) for x in (flat, block_mapping)]
    shape_key = (layers * 2, nblocks, flat.shape[2], pairs)
    if shape_key not in _compiled:
        _compiled[shape_key] = cute.compile(_copy_blocks, *args, layers * 2, pairs, flat.shape[2] // THREADS)
    _compiled[shape_key](*args)
