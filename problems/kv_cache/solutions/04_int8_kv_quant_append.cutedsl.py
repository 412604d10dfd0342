"""GPU (sm_90a) CuTe DSL solution: one warp-sized CTA per (token, K/V, KV head); each lane owns HEAD_DIM/32
elements in registers, the head's absmax is a warp butterfly max, lane 0 writes scale = max(amax, 1e-6) / 127, and
each lane stores clamp(roundeven(x / scale), -127, 127) as int8 at the token's slot of the HND-layout cache."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

INT8_MAX = 127.0
SCALE_MIN = 1e-6
_compiled = {}


@cute.kernel
def _int8_append_kernel(mK: cute.Tensor, mV: cute.Tensor, mC: cute.Tensor, mS: cute.Tensor, mSL: cute.Tensor,
                        per_lane: cutlass.Constexpr, bsize: cutlass.Constexpr):
    lane, _, _ = cute.arch.thread_idx()
    t, kv, h = cute.arch.block_idx()
    slot = cutlass.Int32(mSL[t])
    blk = slot // bsize
    off = slot % bsize
    x = cute.make_rmem_tensor((per_lane,), cutlass.Float32)
    for j in cutlass.range_constexpr(per_lane):
        if kv == 0:
            x[j] = mK[t, h, j * 32 + lane].to(cutlass.Float32)
        else:
            x[j] = mV[t, h, j * 32 + lane].to(cutlass.Float32)
    amax = cutlass.Float32(0.0)
    for j in cutlass.range_constexpr(per_lane):
        amax = cute.arch.fmax(amax, cute.math.absf(x[j]))
    amax = cute.arch.warp_reduction_max(amax)
    scale = cute.arch.fmax(amax, cutlass.Float32(SCALE_MIN)) / cutlass.Float32(INT8_MAX)
    if lane == 0:
        mS[blk, kv, h, off] = scale
    for j in cutlass.range_constexpr(per_lane):
        q = cute.math.roundeven(x[j] / scale)
        q = cute.arch.fmin(cute.arch.fmax(q, cutlass.Float32(-INT8_MAX)), cutlass.Float32(INT8_MAX))
        mC[blk, kv, h, off, j * 32 + lane] = q.to(cutlass.Int8)


@cute.jit
def _int8_append(mK: cute.Tensor, mV: cute.Tensor, mC: cute.Tensor, mS: cute.Tensor, mSL: cute.Tensor,
                 tokens: cutlass.Constexpr, heads: cutlass.Constexpr, per_lane: cutlass.Constexpr,
                 bsize: cutlass.Constexpr):
    _int8_append_kernel(mK, mV, mC, mS, mSL, per_lane, bsize).launch(grid=(tokens, 2, heads), block=(32, 1, 1))


def solve(key, value, kv_cache, kv_scales, slot_mapping):
    tokens, heads, dim = key.shape
    nblocks, bsize = kv_cache.shape[0], kv_cache.shape[3]
    if dim % 32 != 0:
        raise ValueError(f"HEAD_DIM={dim} must be a multiple of 32 (one warp per head)")
    if kv_cache.dtype != torch.int8 or kv_scales.dtype != torch.float32 or key.dtype != torch.bfloat16:
        raise ValueError("key/value must be bfloat16, kv_cache int8 and kv_scales float32")
    if kv_cache.shape != (nblocks, 2, heads, bsize, dim) or kv_scales.shape != (nblocks, 2, heads, bsize):
        raise ValueError("kv_cache must be (NUM_BLOCKS, 2, KV_HEADS, BLOCK_SIZE, HEAD_DIM), kv_scales without HEAD_DIM")
    for x in (key, value, kv_cache, kv_scales, slot_mapping):
        if not x.is_contiguous():
            raise ValueError("all tensors must be contiguous")
    args = [from_dlpack(x) for x in (key, value, kv_cache, kv_scales, slot_mapping)]
    shape_key = (tokens, heads, dim, nblocks, bsize)
    if shape_key not in _compiled:
        _compiled[shape_key] = cute.compile(_int8_append, *args, tokens, heads, dim // 32, bsize)
    _compiled[shape_key](*args)
