# mkb-adversarial: dsl=tirx device=cpu expect=in_place
# problem: kv_cache/01_fp8_kv_cache_append
# hack: runs the honest TIRx append on clones of the caches and scales, then re-points the caller's key_cache/value_cache/k_scales/v_scales at the clones with set_() instead of writing the caller's buffers
# must be rejected because: the mutated inputs (key_cache, value_cache, k_scales, v_scales) must be written in place; after set_() the caller's (the checker's) buffers never changed
import torch
import tvm
from tvm.script import tirx as T

FP8_MAX = 448.0
SCALE_MIN = 1e-6
_compiled = {}


def _e4m3_bits(q):
    """uint8 bit pattern of float8_e4m3fn(q) for a finite float32 q with |q| <= 448 (round to nearest even)."""
    bits = T.reinterpret("uint32", q)
    sign = (bits >> T.uint32(24)) & T.uint32(0x80)
    a = bits & T.uint32(0x7FFFFFFF)
    # Normal range (|q| >= 2^-6): keep 3 mantissa bits with round-half-even, rebias the exponent 127 -> 7.
    normal = ((a + T.uint32(0x7FFFF) + ((a >> T.uint32(20)) & T.uint32(1))) >> T.uint32(20)) - T.uint32(960)
    # Subnormal range: the code is round_half_even(|q| * 2^9) (8 means the smallest normal 2^-6, code 0x08).
    e = a >> T.uint32(23)
    full = (a & T.uint32(0x7FFFFF)) | T.uint32(0x800000)
    s = T.min(T.uint32(141) - T.min(e, T.uint32(120)), T.uint32(26))
    sub = (full + (T.uint32(1) << (s - T.uint32(1))) - T.uint32(1) + ((full >> s) & T.uint32(1))) >> s
    mag = T.if_then_else(a >= T.uint32(0x3C800000), normal, T.if_then_else(e >= T.uint32(116), sub, T.uint32(0)))
    return T.Cast("uint8", sign | mag)


def _build(tokens, heads, dim, nblocks, bsize):
    @T.prim_func
    def fp8_append(k_ptr: T.handle, v_ptr: T.handle, kc_ptr: T.handle, vc_ptr: T.handle, slot_ptr: T.handle,
                   ks_ptr: T.handle, vs_ptr: T.handle):
        K = T.match_buffer(k_ptr, (tokens, heads, dim), "bfloat16")
        V = T.match_buffer(v_ptr, (tokens, heads, dim), "bfloat16")
        KC = T.match_buffer(kc_ptr, (nblocks, bsize, heads, dim), "uint8")
        VC = T.match_buffer(vc_ptr, (nblocks, bsize, heads, dim), "uint8")
        S = T.match_buffer(slot_ptr, (tokens,), "int64")
        KS = T.match_buffer(ks_ptr, (nblocks, bsize, heads), "float32")
        VS = T.match_buffer(vs_ptr, (nblocks, bsize, heads), "float32")
        amax = T.alloc_buffer((2,), "float32")
        for t in T.serial(tokens):
            slot = T.Cast("int32", S[t])
            blk = slot // bsize
            off = slot % bsize
            for h in T.serial(heads):
                amax[0] = T.float32(0)
                amax[1] = T.float32(0)
                for d in T.serial(dim):
                    amax[0] = T.max(amax[0], T.abs(T.Cast("float32", K[t, h, d])))
                    amax[1] = T.max(amax[1], T.abs(T.Cast("float32", V[t, h, d])))
                ks = T.max(amax[0], T.float32(SCALE_MIN)) / T.float32(FP8_MAX)
                vs = T.max(amax[1], T.float32(SCALE_MIN)) / T.float32(FP8_MAX)
                KS[blk, off, h] = ks
                VS[blk, off, h] = vs
                for d in T.serial(dim):
                    qk = T.min(T.max(T.Cast("float32", K[t, h, d]) / ks, T.float32(-FP8_MAX)), T.float32(FP8_MAX))
                    qv = T.min(T.max(T.Cast("float32", V[t, h, d]) / vs, T.float32(-FP8_MAX)), T.float32(FP8_MAX))
                    KC[blk, off, h, d] = _e4m3_bits(qk)
                    VC[blk, off, h, d] = _e4m3_bits(qv)

    return tvm.compile(tvm.IRModule({"main": fp8_append}), target="llvm", tir_pipeline="tirx")["main"]


def solve(key, value, key_cache, value_cache, slot_mapping, k_scales, v_scales):
    tokens, heads, dim = key.shape
    shape_key = (tokens, heads, dim, key_cache.shape[0], key_cache.shape[1])
    if shape_key not in _compiled:
        _compiled[shape_key] = _build(*shape_key)
    kc, vc, ks, vs = key_cache.clone(), value_cache.clone(), k_scales.clone(), v_scales.clone()
    _compiled[shape_key](key, value, kc.view(torch.uint8), vc.view(torch.uint8), slot_mapping, ks, vs)
    for original, fresh in ((key_cache, kc), (value_cache, vc), (k_scales, ks), (v_scales, vs)):
        original.set_(fresh)  # the caller's tensor object now shows the result; its storage is untouched
