# mkb-adversarial: dsl=cutedsl device=cuda expect=in_place
# problem: kv_cache/01_fp8_kv_cache_append
# hack: runs the honest CuTe fp8 append on clones of the caches and scales, then re-points the caller's key_cache/value_cache/k_scales/v_scales at the clones with set_() instead of writing the caller's buffers (the exchange's CUDA IPC memory)
# must be rejected because: the mutated inputs (key_cache, value_cache, k_scales, v_scales) must be written in place; after set_() the caller's (the checker's) buffers never changed
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

FP8_MAX = 448.0
SCALE_MIN = 1e-6
_compiled = {}


@cute.kernel
def _fp8_append_kernel(mK: cute.Tensor, mV: cute.Tensor, mKC: cute.Tensor, mVC: cute.Tensor, mS: cute.Tensor,
                       mKS: cute.Tensor, mVS: cute.Tensor, per_lane: cutlass.Constexpr, bsize: cutlass.Constexpr):
    lane, _, _ = cute.arch.thread_idx()
    t, h, _ = cute.arch.block_idx()
    slot = cutlass.Int32(mS[t])
    blk = slot // bsize
    off = slot % bsize
    amax_k = cutlass.Float32(0.0)
    amax_v = cutlass.Float32(0.0)
    for j in cutlass.range_constexpr(per_lane):
        d = j * 32 + lane
        amax_k = cute.arch.fmax(amax_k, cute.math.absf(mK[t, h, d].to(cutlass.Float32)))
        amax_v = cute.arch.fmax(amax_v, cute.math.absf(mV[t, h, d].to(cutlass.Float32)))
    amax_k = cute.arch.warp_reduction_max(amax_k)
    amax_v = cute.arch.warp_reduction_max(amax_v)
    ks = cute.arch.fmax(amax_k, cutlass.Float32(SCALE_MIN)) / cutlass.Float32(FP8_MAX)
    vs = cute.arch.fmax(amax_v, cutlass.Float32(SCALE_MIN)) / cutlass.Float32(FP8_MAX)
    if lane == 0:
        mKS[blk, off, h] = ks
        mVS[blk, off, h] = vs
    for j in cutlass.range_constexpr(per_lane):
        d = j * 32 + lane
        qk = mK[t, h, d].to(cutlass.Float32) / ks
        qv = mV[t, h, d].to(cutlass.Float32) / vs
        qk = cute.arch.fmin(cute.arch.fmax(qk, cutlass.Float32(-FP8_MAX)), cutlass.Float32(FP8_MAX))
        qv = cute.arch.fmin(cute.arch.fmax(qv, cutlass.Float32(-FP8_MAX)), cutlass.Float32(FP8_MAX))
        mKC[blk, off, h, d] = qk.to(cutlass.Float8E4M3FN)
        mVC[blk, off, h, d] = qv.to(cutlass.Float8E4M3FN)


@cute.jit
def _fp8_append(mK: cute.Tensor, mV: cute.Tensor, mKC: cute.Tensor, mVC: cute.Tensor, mS: cute.Tensor,
                mKS: cute.Tensor, mVS: cute.Tensor, tokens: cutlass.Constexpr, heads: cutlass.Constexpr,
                per_lane: cutlass.Constexpr, bsize: cutlass.Constexpr):
    _fp8_append_kernel(mK, mV, mKC, mVC, mS, mKS, mVS, per_lane, bsize).launch(
        grid=(tokens, heads, 1), block=(32, 1, 1))


def solve(key, value, key_cache, value_cache, slot_mapping, k_scales, v_scales):
    tokens, heads, dim = key.shape
    nblocks, bsize = key_cache.shape[0], key_cache.shape[1]
    kc, vc, ks, vs = key_cache.clone(), value_cache.clone(), k_scales.clone(), v_scales.clone()
    args = [from_dlpack(t) for t in (key, value, kc, vc, slot_mapping, ks, vs)]
    shape_key = (tokens, heads, dim, nblocks, bsize)
    if shape_key not in _compiled:
        _compiled[shape_key] = cute.compile(_fp8_append, *args, tokens, heads, dim // 32, bsize)
    _compiled[shape_key](*args)
    for original, fresh in ((key_cache, kc), (value_cache, vc), (k_scales, ks), (v_scales, vs)):
        original.set_(fresh)  # the caller's tensor object now shows the result; its storage is untouched
